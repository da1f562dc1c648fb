package platform

// Version is the build's version, set at link time by `make build`
// (-ldflags "-X github.com/tributary-cdp/tributary/platform.Version=..."). It is "dev" otherwise.
// It is a variable only so that the linker can set it: nothing assigns it at run time.
var Version = "dev"

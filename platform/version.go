package platform

import (
	"fmt"
	"os"
	"runtime"
)

// Version is the build's version, set at link time by `make build`
// (-ldflags "-X github.com/tributary-cdp/tributary/platform.Version=..."). It is "dev" otherwise.
// It is a variable only so that the linker can set it: nothing assigns it at run time.
var Version = "dev"

// VersionString is what -version prints and the start logs say: "<name> <Version> (<Go
// version> <os>/<arch>)".
func VersionString(name string) string {
	return name + " " + Version + " (" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")"
}

// PrintVersionIfAsked prints VersionString(name) to stdout and exits 0 when the first
// argument is -version or --version. Every command calls it first thing in main.
func PrintVersionIfAsked(name string) {
	if len(os.Args) > 1 && (os.Args[1] == "-version" || os.Args[1] == "--version") {
		fmt.Println(VersionString(name))
		os.Exit(0)
	}
}

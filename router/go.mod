module github.com/tributary-cdp/tributary/router

go 1.26

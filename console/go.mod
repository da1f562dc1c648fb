module github.com/tributary-cdp/tributary/console

go 1.26

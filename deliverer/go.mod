module github.com/tributary-cdp/tributary/deliverer

go 1.26

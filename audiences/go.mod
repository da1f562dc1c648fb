module github.com/tributary-cdp/tributary/audiences

go 1.26

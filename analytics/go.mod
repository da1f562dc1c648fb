module github.com/tributary-cdp/tributary/analytics

go 1.26

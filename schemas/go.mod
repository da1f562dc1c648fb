module github.com/tributary-cdp/tributary/schemas

go 1.26.0

require (
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/net v0.62.0
)

require golang.org/x/text v0.43.0

package console

import _ "embed"

// OpenAPI is the API's description, console/openapi.yaml (OpenAPI 3.1): every route of
// routes(), checked against the handlers by TestOpenAPI.
//
//go:embed openapi.yaml
var OpenAPI []byte

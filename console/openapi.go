package console

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the API's description, console/openapi.yaml (OpenAPI 3.1): every route of
// routes(), checked against the handlers by TestOpenAPI.
//
//go:embed openapi.yaml
var OpenAPI []byte

// openAPISpec answers the API's contract, console/openapi.yaml.
func (s *Service) openAPISpec(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Cache-Control", "no-store")
	_, err := w.Write(OpenAPI)
	return err
}

// Package openapi embeds the OpenAPI document that protoc-gen-openapiv2
// generates from proto/ and proto/shindo/api.yaml (this file is the only
// hand-written one here).
package openapi

import (
	_ "embed"
	"encoding/json"
)

// JSON is the OpenAPI (Swagger 2.0) document of the REST API: every route,
// as an edge serves them (its own and those it routes to the cores).
//
//go:embed shindo.swagger.json
var JSON []byte

// Select returns the document with the paths keep accepts: what a server
// that answers only those serves, so the document it publishes is true.
func Select(keep func(path string) bool) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(JSON, &doc); err != nil {
		return nil, err
	}
	if paths, ok := doc["paths"].(map[string]any); ok {
		for path := range paths {
			if !keep(path) {
				delete(paths, path)
			}
		}
	}
	return json.MarshalIndent(doc, "", "  ")
}

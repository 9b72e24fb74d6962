// Package openapi embeds the OpenAPI document that protoc-gen-openapiv2
// generates from proto/ and proto/shindo/api.yaml (this file is the only
// hand-written one here).
package openapi

import _ "embed"

// JSON is the OpenAPI (Swagger 2.0) document of the REST API.
//
//go:embed shindo.swagger.json
var JSON []byte

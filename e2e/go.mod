module shindo.dev/e2e

go 1.26.0

require (
	github.com/chromedp/chromedp v0.23.0
	github.com/coder/websocket v1.8.15
	github.com/getkin/kin-openapi v0.153.0
	golang.org/x/sys v0.49.0
	google.golang.org/grpc v1.85.0
	gopkg.in/yaml.v3 v3.0.1
	shindo.dev/devkit v0.0.0-00010101000000-000000000000
	shindo.dev/gen v0.0.0
	shindo.dev/lib v0.0.0
	shindo.dev/sdk v0.0.0
)

require (
	github.com/chromedp/cdproto v0.159.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/go-openapi/jsonpointer v1.0.2 // indirect
	github.com/gorilla/mux v1.8.0 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.33.0 // indirect
	github.com/kr/pretty v0.3.1 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	go.yaml.in/yaml/v4 v4.0.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20261026165753-2ffab32bce7e // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261019180522-ce908d29299b // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	shindo.dev/gen => ../gen
	shindo.dev/lib => ../lib
	shindo.dev/sdk => ../sdk
)

replace shindo.dev/devkit => ../devkit

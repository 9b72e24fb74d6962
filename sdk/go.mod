module shindo.dev/sdk

go 1.26.0

require (
	github.com/coder/websocket v1.8.15
	google.golang.org/protobuf v1.36.12
	shindo.dev/gen v0.0.0
)

require (
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.33.0 // indirect
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20261026165753-2ffab32bce7e // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261019180522-ce908d29299b // indirect
	google.golang.org/grpc v1.85.0 // indirect
	shindo.dev/devkit v0.0.0-00010101000000-000000000000
	shindo.dev/lib v0.0.0
)

replace shindo.dev/gen => ../gen

replace shindo.dev/lib => ../lib

replace shindo.dev/devkit => ../devkit

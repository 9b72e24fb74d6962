module shindo.dev/e2e

go 1.26.0

require (
	gopkg.in/yaml.v3 v3.0.1
	shindo.dev/gen v0.0.0
	shindo.dev/lib v0.0.0
)

require google.golang.org/protobuf v1.36.12 // indirect

replace (
	shindo.dev/gen => ../gen
	shindo.dev/lib => ../lib
)

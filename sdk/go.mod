module shindo.dev/sdk

go 1.26.0

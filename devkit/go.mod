module shindo.dev/devkit

go 1.26.0

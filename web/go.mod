module shindo.dev/web

go 1.26.0

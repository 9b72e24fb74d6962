module shindo.dev/seismo

go 1.26.0

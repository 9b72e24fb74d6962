// Package web holds the dashboard the edges serve: static files embedded in
// the binary, so an edge needs nothing on disk and every edge serves the
// same page. The page talks only to the edge that served it (and, after
// three failed reconnects, to the next entrance), through the public routes.
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Prefix is where the dashboard lives on an edge.
const Prefix = "/dashboard/"

// Handler serves the dashboard's files under Prefix.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Revalidate every time: a deploy must not leave browsers on an
		// old page talking to a new edge.
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

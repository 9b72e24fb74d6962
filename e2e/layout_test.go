package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// layoutModules are the repository's modules, by directory, as
// docs/ARCHITECTURE.md's table lists them.
var layoutModules = []string{"gen", "lib", "devkit", "seismo", "sdk", "web", "svc-ingest", "svc-rts", "svc-waveform", "svc-dataapi", "svc-edge", "cli", "e2e"}

// mayImport is the one-way dependency rule of docs/ARCHITECTURE.md: the
// modules a module's packages (not its tests) may import, besides its own.
var mayImport = map[string][]string{
	"gen":          nil,
	"seismo":       nil,
	"web":          nil,
	"devkit":       nil,
	"lib":          {"gen", "seismo"},
	"sdk":          {"gen", "lib"},
	"svc-ingest":   {"gen", "lib", "seismo"},
	"svc-rts":      {"gen", "lib", "seismo"},
	"svc-waveform": {"gen", "lib", "seismo"},
	"svc-dataapi":  {"gen", "lib", "seismo"},
	"svc-edge":     {"gen", "lib", "seismo", "web"},
	"cli":          {"gen", "lib", "seismo", "sdk", "devkit"},
	"e2e":          {"gen", "lib", "seismo", "sdk", "devkit"},
}

// TestImportGraph reads the import graph with go list and checks the
// layout docs/ARCHITECTURE.md states: no package imports from a module its
// layer may not see (a library never imports a service, nothing
// production imports devkit), and every package under lib/ is linked by a
// service — the tooling of tests and of the CLI lives in devkit, and what
// only one service uses lives in that service.
func TestImportGraph(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	type pkg struct {
		ImportPath string
		Imports    []string
	}
	moduleOf := func(path string) string {
		rest, ok := strings.CutPrefix(path, "shindo.dev/")
		if !ok {
			return ""
		}
		return strings.SplitN(rest, "/", 2)[0]
	}
	importers := map[string][]string{} // lib package → the packages importing it
	var violations []string
	for _, m := range layoutModules {
		cmd := exec.Command("go", "list", "-json", "./...")
		cmd.Dir = filepath.Join(root, m)
		out, err := cmd.Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("go list in %s: %v\n%s", m, err, ee.Stderr)
			}
			t.Fatalf("go list in %s: %v", m, err)
		}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		for {
			var p pkg
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			for _, imp := range p.Imports {
				to := moduleOf(imp)
				if to == "" || to == m {
					if to == "lib" && m == "lib" {
						importers[imp] = append(importers[imp], p.ImportPath)
					}
					continue
				}
				if !slices.Contains(mayImport[m], to) {
					violations = append(violations, p.ImportPath+" imports "+imp)
				}
				if to == "lib" {
					importers[imp] = append(importers[imp], p.ImportPath)
				}
			}
		}
	}
	// A lib package is linked by a service when a service package imports
	// it, or a lib package that is.
	linked := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for lib, by := range importers {
			if linked[lib] {
				continue
			}
			for _, p := range by {
				if strings.HasPrefix(p, "shindo.dev/svc-") || linked[p] {
					linked[lib], changed = true, true
					break
				}
			}
		}
	}
	cmd := exec.Command("go", "list", "./...")
	cmd.Dir = filepath.Join(root, "lib")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in lib: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasSuffix(p, "test") { // a package of test helpers beside the package it serves
			continue
		}
		if !linked[p] {
			violations = append(violations, p+" is linked by no service (imported by "+strings.Join(importers[p], ", ")+")")
		}
	}
	for _, v := range violations {
		t.Error(v)
	}
}

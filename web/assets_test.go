package web

import (
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// References to other files: src= and href= in HTML, url() in CSS, import
// specifiers in JavaScript modules.
var refPatterns = map[string][]*regexp.Regexp{
	".html": {regexp.MustCompile(`(?i)\b(?:src|href)\s*=\s*["']([^"']*)["']`)},
	".css":  {regexp.MustCompile(`(?i)\burl\(\s*["']?([^"')]+)["']?\s*\)`)},
	".js": {
		regexp.MustCompile(`(?m)^\s*(?:import|export)\b[^"';]*?\bfrom\s*["']([^"']+)["']`),
		regexp.MustCompile(`(?m)^\s*import\s*["']([^"']+)["']`),
		regexp.MustCompile(`\bimport\(\s*["']([^"']+)["']\s*\)`),
	},
}

// TestAssetsResolve checks the embedded dashboard: every file a page,
// stylesheet or module refers to exists, nothing is loaded from elsewhere
// (the dashboard must work with no network beyond its edge), and every
// file is reachable from index.html.
func TestAssetsResolve(t *testing.T) {
	t.Parallel()
	files, err := fs.Sub(static, "static")
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	err = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			all = append(all, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(all, "index.html") {
		t.Fatalf("no index.html among %v", all)
	}

	refs := map[string][]string{} // file → files it refers to
	for _, name := range all {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if i := strings.Index(strings.ToLower(text), "http://"); i >= 0 {
			t.Errorf("%s: an http:// URL at byte %d: %q", name, i, excerpt(text, i))
		}
		if i := strings.Index(strings.ToLower(text), "https://"); i >= 0 {
			t.Errorf("%s: an https:// URL at byte %d: %q", name, i, excerpt(text, i))
		}
		for _, re := range refPatterns[path.Ext(name)] {
			for _, m := range re.FindAllStringSubmatch(text, -1) {
				ref := m[1]
				switch {
				case strings.HasPrefix(ref, "data:"):
					continue
				case strings.Contains(ref, "://") || strings.HasPrefix(ref, "//"):
					t.Errorf("%s: refers to another site: %q", name, ref)
					continue
				case strings.HasPrefix(ref, "/"):
					t.Errorf("%s: absolute path %q: refer to dashboard files relatively", name, ref)
					continue
				}
				target := path.Join(path.Dir(name), strings.SplitN(strings.SplitN(ref, "?", 2)[0], "#", 2)[0])
				if _, err := fs.Stat(files, target); err != nil {
					t.Errorf("%s: refers to %q, which is not embedded", name, ref)
					continue
				}
				refs[name] = append(refs[name], target)
			}
		}
	}

	// Every file is reachable from the page.
	seen := map[string]bool{"index.html": true}
	queue := []string{"index.html"}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		for _, r := range refs[f] {
			if !seen[r] {
				seen[r] = true
				queue = append(queue, r)
			}
		}
	}
	for _, name := range all {
		if !seen[name] {
			t.Errorf("%s is embedded but nothing refers to it", name)
		}
	}
}

func excerpt(s string, i int) string {
	return s[max(0, i-20):min(len(s), i+40)]
}

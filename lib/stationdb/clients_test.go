package stationdb_test

import (
	"strings"
	"testing"

	"shindo.dev/lib/stationdb"
)

// FuzzParseKey: any text is refused or splits into a key ID and a secret
// that make the same key again.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"shk_0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "shk_", "",
		"shk_0123456789ABCDEF.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "shk_0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		id, secret, ok := stationdb.ParseKey(key)
		if !ok {
			return
		}
		if len(secret) != 32 || !strings.HasPrefix(key, id+".") || len(id) != 20 {
			t.Fatalf("%q → %q, %d bytes", key, id, len(secret))
		}
	})
}

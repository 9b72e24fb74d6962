package reports

import (
	"strings"
	"testing"
)

func TestTokenRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind byte
		time int64
		id   string
	}{
		{KindReports, 1712102289000, "113000-2024-0403-075809"},
		{KindDetections, 0, "1712102289000-18"},
		{KindReports, 253402300799999, strings.Repeat("z", 64)},
	} {
		tok := EncodeToken(tc.kind, tc.time, tc.id)
		if len(tok) > MaxTokenLen {
			t.Fatalf("token of %d characters", len(tok))
		}
		tm, id, err := DecodeToken(tc.kind, tok)
		if err != nil || tm != tc.time || id != tc.id {
			t.Fatalf("%q → %d %q %v", tok, tm, id, err)
		}
		other := KindDetections
		if tc.kind == KindDetections {
			other = KindReports
		}
		if _, _, err := DecodeToken(other, tok); err == nil {
			t.Fatalf("a %c token accepted as %c", tc.kind, other)
		}
	}
	for _, bad := range []string{"", "=", "AQ", "not base64!", strings.Repeat("A", 200), EncodeToken(KindReports, -1, "x"),
		EncodeToken(KindReports, 1, ""), EncodeToken(KindReports, 1, "a\x00b"), EncodeToken(KindReports, 1, "\xff")} {
		if _, _, err := DecodeToken(KindReports, bad); err != ErrToken {
			t.Errorf("DecodeToken(%q): %v", bad, err)
		}
	}
}

// FuzzDecodeToken: any text is either refused or decodes to a position
// that encodes back to the same token.
func FuzzDecodeToken(f *testing.F) {
	f.Add(EncodeToken(KindReports, 1712102289000, "113000-2024-0403-075809"))
	f.Add(EncodeToken(KindDetections, 1712102289000, "1712102289000-18"))
	f.Add("AXIAAAGOpTwOyDExMzAwMA")
	f.Add("' OR 1=1 --")
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		for _, kind := range []byte{KindReports, KindDetections} {
			tm, id, err := DecodeToken(kind, tok)
			if err != nil {
				continue
			}
			if tm < 0 || id == "" || len(id) > 64 {
				t.Fatalf("%q decoded to %d %q", tok, tm, id)
			}
			if again := EncodeToken(kind, tm, id); again != tok {
				t.Fatalf("%q decoded to %d %q, which encodes to %q", tok, tm, id, again)
			}
		}
	})
}

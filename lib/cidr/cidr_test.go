package cidr

import (
	"net/netip"
	"testing"
)

func TestParseAndContains(t *testing.T) {
	ps, err := Parse([]string{"10.1.0.0/16", " 127.0.0.1 ", "", "2001:db8::/32"})
	if err != nil {
		t.Fatal(err)
	}
	for a, want := range map[string]bool{
		"10.1.2.3": true, "10.2.0.1": false, "127.0.0.1": true, "127.0.0.2": false,
		"::ffff:127.0.0.1": true, "2001:db8::5": true, "2001:db9::5": false,
	} {
		if got := Contains(ps, netip.MustParseAddr(a)); got != want {
			t.Errorf("%s: %v, want %v", a, got, want)
		}
	}
	if _, err := Parse([]string{"10.0.0.0/33"}); err == nil {
		t.Error("10.0.0.0/33 accepted")
	}
	if _, err := Parse([]string{"edge.example"}); err == nil {
		t.Error("a host name accepted")
	}
}

package seedcode

import (
	"fmt"
	"testing"
)

func TestStation(t *testing.T) {
	t.Parallel()
	taken := map[string]bool{"00042": true}
	isTaken := func(c string) bool { return taken[c] }
	tests := []struct{ id, want string }{
		{"TAP01", "TAP01"},
		{"tap1", "TAP1"},
		{"SIM00007", "00007"},
		{"tw-hl-0007", "L0007"},
		{"A", "A"},
	}
	for _, tt := range tests {
		if got := Station(tt.id, isTaken); got != tt.want {
			t.Errorf("Station(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
	// Taken, empty or odd: a hashed code, stable and valid.
	for _, id := range []string{"TST00042", "—", "☃☃"} {
		got := Station(id, isTaken)
		if !IsCode(got, MaxStation, MaxStation) || got == "00042" {
			t.Errorf("Station(%q) = %q", id, got)
		}
		if again := Station(id, isTaken); again != got {
			t.Errorf("Station(%q) not deterministic: %q then %q", id, got, again)
		}
	}
	// Many stations sharing suffixes never share a code.
	seen := map[string]string{}
	for _, prefix := range []string{"SIM", "TST", "A-", "B_"} {
		for i := range 3000 {
			id := fmt.Sprintf("%s%05d", prefix, i)
			c := Station(id, func(c string) bool { _, ok := seen[c]; return ok })
			if other, ok := seen[c]; ok {
				t.Fatalf("%s and %s both %s", id, other, c)
			}
			seen[c] = id
		}
	}
}

// TestStationHashed pins rule 3's codes: the archive has named stations
// by it since before the registry held codes, and lib/metadb's migration
// repeats it in SQL, so it may never change.
func TestStationHashed(t *testing.T) {
	t.Parallel()
	all := func(string) bool { return false }
	for _, tt := range []struct{ id, want string }{
		{"—", "BNJUT"},
		{"TST00042", "NLGP9"},
	} {
		taken := func(c string) bool { return c == "00042" }
		if tt.id == "—" {
			taken = all
		}
		if got := Station(tt.id, taken); got != tt.want {
			t.Errorf("Station(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, c := range []Codes{
		{"SH", "00001", "00"},
		{"T", "A", ""},
		{"TW", "HUA01", "10"},
	} {
		if err := c.Check(); err != nil {
			t.Errorf("%v: %v", c, err)
		}
	}
	for _, c := range []Codes{
		{"", "00001", "00"},
		{"SIM", "00001", "00"},
		{"sh", "00001", "00"},
		{"SH", "", "00"},
		{"SH", "SIM00001", "00"},
		{"SH", "A.B", "00"},
		{"SH", "00001", "000"},
		{"SH", "00001", " 0"},
		{"SH", "ÄBC", ""},
	} {
		if err := c.Check(); err == nil {
			t.Errorf("%v: no error", c)
		}
	}
	if c := (Codes{"SH", "00001", "00"}); c.String() != "SH.00001.00" || c.Key() != "SH.00001" || c.IsZero() {
		t.Errorf("%v: String %q Key %q IsZero %t", c, c.String(), c.Key(), c.IsZero())
	}
}

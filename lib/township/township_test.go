package township

import "testing"

func TestTable(t *testing.T) {
	t.Parallel()
	all := All()
	if len(all) < 50 {
		t.Fatalf("only %d townships", len(all))
	}
	for i, tw := range all {
		if i > 0 && all[i-1].Code >= tw.Code {
			t.Fatalf("codes not strictly ascending at %d", tw.Code)
		}
		// Taiwan, Penghu and Kinmen lie within this box.
		if tw.Lat < 21.8 || tw.Lat > 25.4 || tw.Lon < 118.2 || tw.Lon > 122.1 {
			t.Errorf("%d %s at %.3f,%.3f is outside Taiwan", tw.Code, tw.Name, tw.Lat, tw.Lon)
		}
	}
	if tw, ok := Lookup(970); !ok || tw.Name != "Hualien City" {
		t.Fatalf("Lookup(970) = %v, %v", tw, ok)
	}
	if _, ok := Lookup(999); ok {
		t.Fatal("Lookup(999) found something")
	}
}

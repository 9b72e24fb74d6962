package area

import "testing"

func TestBox(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		lat, lon float64
		want     uint32
		ok       bool
	}{
		{"Taipei", 25.03, 121.52, 4, true},     // row 1, col 7
		{"Hualien", 23.99, 121.61, 18, true},   // row 4, col 7
		{"Kaohsiung", 22.63, 120.31, 31, true}, // row 7, col 4
		{"Kinmen", 24.43, 118.32, 41, true},    // row 2, col 0
		{"Taitung", 22.76, 121.14, 33, true},   // row 7, col 6
		{"open sea east", 23.5, 123.0, 0, false},
		{"Tokyo", 35.68, 139.69, 0, false},
		{"cell without box", 25.3, 118.0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := Box(tt.lat, tt.lon)
			if ok != tt.ok || (ok && got != tt.want) {
				t.Fatalf("Box(%v, %v) = %d, %v; want %d, %v", tt.lat, tt.lon, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestEveryBoxRoundTrips(t *testing.T) {
	t.Parallel()
	for id := range uint32(NumBoxes) {
		s, n, w, e, ok := Bounds(id)
		if !ok {
			t.Fatalf("box %d has no bounds", id)
		}
		got, ok := Box((s+n)/2, (w+e)/2)
		if !ok || got != id {
			t.Fatalf("centre of box %d maps to %d, %v", id, got, ok)
		}
	}
	if _, _, _, _, ok := Bounds(uint32(NumBoxes)); ok {
		t.Fatal("bounds for an unknown box")
	}
}

package loadtest

import (
	"os"
	"testing"
)

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, tt := range []struct{ q, want float64 }{{0, 1}, {0.5, 6}, {0.9, 10}, {0.99, 10}, {1, 10}} {
		if got := Quantile(xs, tt.q); got != tt.want {
			t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if xs[0] != 5 {
		t.Error("the samples were reordered")
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("no samples: want 0")
	}
}

func TestRSSAndFileLimit(t *testing.T) {
	if self, byPID := RSS(0), RSS(os.Getpid()); self == 0 || byPID == 0 {
		t.Fatalf("RSS: self %d, by pid %d", self, byPID)
	}
	if RSS(-1) != 0 {
		t.Error("RSS of no process: want 0")
	}
	if got := RaiseFileLimit(64); got < 64 || got > FileLimit() {
		t.Fatalf("RaiseFileLimit(64) = %d (hard limit %d)", got, FileLimit())
	}
}

package waveforms

import (
	"testing"

	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
)

// TestFileName: the download's name comes from the archive's SEED codes,
// and codes that could break out of the Content-Disposition header (or are
// simply not SEED codes) are refused rather than sent.
func TestFileName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		net, sta, loc string
		want          string
	}{
		{"SH", "HUA01", "00", "SH.HUA01.00.20260101T000000.mseed"},
		{"S", "A", "", "S.A..20260101T000000.mseed"},
		{"", "HUA01", "00", ""},
		{"SH", "", "00", ""},
		{"SH", "HUA012", "00", ""},
		{"SHX", "HUA01", "00", ""},
		{"SH", "HUA01", "000", ""},
		{"SH", `A"B`, "00", ""},
		{"sh", "HUA01", "00", ""},
		{"SH", "HU\r\n", "00", ""},
	} {
		got, ok := fileName(&waveformv1.ExportResponse{NetworkCode: tc.net, StationCode: tc.sta, LocationCode: tc.loc}, 1767225600000)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%q %q %q: %q %v, want %q", tc.net, tc.sta, tc.loc, got, ok, tc.want)
		}
	}
}

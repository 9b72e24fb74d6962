package compatjson

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

func flashDetections() []*rtsv1.Detection {
	ds := detections()
	ds[0].Areas = []*rtsv1.AreaLevel{{Code: 970, Level: 5}, {Code: 971, Level: 4}, {Code: 974, Level: 6}, {Code: 975, Level: 5}}
	ds[0].AreaSerial = 4
	ds[0].Lpgm = []*rtsv1.StationLPGM{{StationId: "S0001", Level: 2, SvaCms: 17.26}, {StationId: "S0007", Level: 1, SvaCms: 5}}
	ds[1].Areas = []*rtsv1.AreaLevel{{Code: 270, Level: 3}}
	ds[1].AreaSerial = 1
	return append(ds, &rtsv1.Detection{Id: "quiet", Final: true}) // lit nothing: not listed
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if os.Getenv("UPDATE_GOLDEN") != "" {
		os.WriteFile(path, got, 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestIntensityGolden(t *testing.T) {
	t.Parallel()
	golden(t, "intensity.golden.json", Intensity(DefaultAuthor, flashDetections()))
}

func TestLPGMGolden(t *testing.T) {
	t.Parallel()
	golden(t, "lpgm.golden.json", LPGM(DefaultAuthor, flashDetections()))
}

// TestFlashShape checks the types TREM-Lite reads: id a number of Unix ms
// (data.js:455-456 expires a flash 600 s after it), serial a number, area
// an object of level → array of numeric codes, max an integer; an LPGM
// list of {id, lpgm 1–4} (lpgm.js:62-93).
func TestFlashShape(t *testing.T) {
	t.Parallel()
	var flashes []struct {
		ID     float64          `json:"id"`
		Serial float64          `json:"serial"`
		Max    int              `json:"max"`
		Area   map[string][]int `json:"area"`
		End    *int             `json:"IntensityEnd"`
		Final  int              `json:"final"`
	}
	if err := json.Unmarshal(Intensity(DefaultAuthor, flashDetections()), &flashes); err != nil {
		t.Fatal(err)
	}
	if len(flashes) != 2 {
		t.Fatalf("%d flashes", len(flashes))
	}
	f := flashes[0]
	if f.ID != 1_800_000_005_500 || f.ID != math.Trunc(f.ID) || f.Serial != 4 || f.Max != 6 || f.End != nil {
		t.Fatalf("flash %+v", f)
	}
	if len(f.Area["6"]) != 1 || len(f.Area["5"]) != 2 || f.Area["5"][0] != 970 || f.Area["4"][0] != 971 {
		t.Fatalf("areas %v", f.Area)
	}
	if g := flashes[1]; g.Final != 1 || g.End == nil || *g.End != 1 {
		t.Fatalf("the final flash lacks its end marker: %+v", g)
	}
	var lp []struct {
		ID   float64 `json:"id"`
		List []struct {
			ID   string `json:"id"`
			LPGM int    `json:"lpgm"`
		} `json:"list"`
	}
	if err := json.Unmarshal(LPGM(DefaultAuthor, flashDetections()), &lp); err != nil {
		t.Fatal(err)
	}
	if len(lp) != 1 || lp[0].ID != 1_800_000_005_500 || len(lp[0].List) != 2 || lp[0].List[0].LPGM != 2 {
		t.Fatalf("lpgm %+v", lp)
	}
	if string(Intensity(DefaultAuthor, nil)) != "[]" || string(LPGM(DefaultAuthor, nil)) != "[]" {
		t.Fatal("nothing lit must give []")
	}
}

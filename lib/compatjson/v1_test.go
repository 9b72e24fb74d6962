package compatjson

import (
	"encoding/json"
	"regexp"
	"strconv"
	"testing"
	"time"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

func v1Snapshot() *rtsv1.Snapshot {
	s := snapshot()
	s.Detections = flashDetections()[:2]
	s.TimeMs = s.Detections[0].GetOriginTimeMs() + 250_000 // the first began more than 240 s before: not tracked
	return s
}

func TestRTSv1Golden(t *testing.T) {
	t.Parallel()
	golden(t, "rts_v1.golden.json", RTSv1(v1Snapshot()))
}

func TestIntensityV1Golden(t *testing.T) {
	t.Parallel()
	golden(t, "intensity_v1.golden.json", IntensityV1(v1Snapshot()))
	golden(t, "intensity_v1.golden.xml", IntensityXML(flashDetections()[0]))
}

// TestRTSv1AsTheAppReads follows rtsV1.ts (readRtsV1): stations required,
// each with a numeric i, alert exactly 1; eq entries of four finite
// numbers, the last the origin in Unix seconds.
func TestRTSv1AsTheAppReads(t *testing.T) {
	t.Parallel()
	var p struct {
		TS       int64                     `json:"ts"`
		Stations map[string]map[string]any `json:"stations"`
		EQ       [][]float64               `json:"eq"`
	}
	if err := json.Unmarshal(RTSv1(v1Snapshot()), &p); err != nil {
		t.Fatal(err)
	}
	if p.Stations == nil || p.TS == 0 {
		t.Fatalf("%+v", p)
	}
	for id, s := range p.Stations {
		if _, ok := s["i"].(float64); !ok {
			t.Errorf("%s: i %v", id, s["i"])
		}
		if a, ok := s["alert"]; ok && a != 1.0 {
			t.Errorf("%s: alert %v", id, a)
		}
	}
	if p.Stations["S0001"]["alert"] != 1.0 {
		t.Errorf("a triggered station without alert 1")
	}
	if len(p.EQ) != 1 || len(p.EQ[0]) != 4 || p.EQ[0][3] != 1_800_000_025 {
		t.Errorf("eq %v: the second detection only (the first began more than 240 s before)", p.EQ)
	}
}

// TestIntensityXMLAsTheAppReads follows readIntensityXml
// (intensityV1.ts): the Head's 14-digit EventID in +08:00 gives the same
// instant as the JSON's id; Serial; each Area's JMA level and its towns.
func TestIntensityXMLAsTheAppReads(t *testing.T) {
	t.Parallel()
	d := flashDetections()[0]
	xml := string(IntensityXML(d))
	head := regexp.MustCompile(`<Head>([\s\S]*?)</Head>`).FindStringSubmatch(xml)
	if head == nil {
		t.Fatalf("no Head: %s", xml)
	}
	stamp := regexp.MustCompile(`<EventID>(\d{14})</EventID>`).FindStringSubmatch(head[1])
	serial := regexp.MustCompile(`<Serial>(\d+)</Serial>`).FindStringSubmatch(head[1])
	if stamp == nil || serial == nil || serial[1] != "4" {
		t.Fatalf("head %s", head[1])
	}
	at, _ := time.ParseInLocation("20060102150405", stamp[1], time.FixedZone("", 8*3600))
	if at.Unix() != d.GetFirstTriggerMs()/1000 {
		t.Fatalf("EventID %s is %v, want %v", stamp[1], at, time.UnixMilli(d.GetFirstTriggerMs()))
	}
	levels := map[string]int{"1": 1, "2": 2, "3": 3, "4": 4, "5-": 5, "5+": 6, "6-": 7, "6+": 8, "7": 9}
	got := map[int][]int{}
	for _, m := range regexp.MustCompile(`<Area level="([^"]+)">([\s\S]*?)</Area>`).FindAllStringSubmatch(xml, -1) {
		for _, tm := range regexp.MustCompile(`<Town code="(\d+)"`).FindAllStringSubmatch(m[2], -1) {
			c, _ := strconv.Atoi(tm[1])
			got[levels[m[1]]] = append(got[levels[m[1]]], c)
		}
	}
	if len(got[6]) != 1 || got[6][0] != 974 || len(got[5]) != 2 || len(got[4]) != 1 {
		t.Fatalf("areas %v from %s", got, xml)
	}
}

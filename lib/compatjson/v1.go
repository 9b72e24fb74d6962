package compatjson

import (
	"strconv"
	"time"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

// The v1 topics: what the newest generation of TREM-Lite's TypeScript
// rewrite reads from GET /api/v1/trem/sse and its replays under /api/v3
// (packages/core/src/features/data/dataHttp.ts, rtsV1.ts and
// intensityV1.ts of ExpTechTW/TREM-Lite at 2400a0e/b120a76/2c552ae).

// trackedMs is how long after its origin an earthquake stays in rts.v1's
// eq list (rtsV1.ts: "each for 240 s after its origin").
const trackedMs = 240_000

// RTSv1 renders a snapshot as an rts.v1 payload:
//
//	{"ts":ms,"stations":{"<id>":{"i":f,"pga":f,"alert":1}},
//	 "eq":[[lat,lon,depth km,origin Unix s],…]}
//
// ExpTech's payloads name the node that made them ("source"), which the
// app does not read; shindo leaves it out, so that a payload is the same
// whichever core computed the tick, and a replay equals the live event.
// alert is the number 1 for a triggered station, absent otherwise; eq lists
// the detections whose origin is less than 240 s before the tick. The app
// computes box and int itself from the alerting stations and its station
// list (GET /resource/station).
func RTSv1(s *rtsv1.Snapshot) []byte {
	b := make([]byte, 0, 96+len(s.GetStations())*48)
	b = append(b, `{"ts":`...)
	b = strconv.AppendInt(b, s.GetTimeMs(), 10)
	b = append(b, `,"stations":{`...)
	for i, st := range s.GetStations() {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, st.GetStationId())
		b = append(b, `:{"i":`...)
		b = appendFloat(b, st.GetIntensity(), 2)
		b = append(b, `,"pga":`...)
		b = appendFloat(b, st.GetPga(), 3)
		if st.GetAlert() {
			b = append(b, `,"alert":1`...)
		}
		b = append(b, '}')
	}
	b = append(b, `},"eq":[`...)
	n := 0
	for _, d := range s.GetDetections() {
		if s.GetTimeMs()-d.GetOriginTimeMs() > trackedMs {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, '[')
		b = appendFloat64(b, d.GetLat(), 4)
		b = append(b, ',')
		b = appendFloat64(b, d.GetLon(), 4)
		b = append(b, ',')
		b = appendFloat64(b, d.GetDepthKm(), 1)
		b = append(b, ',')
		b = strconv.AppendInt(b, d.GetOriginTimeMs()/1000, 10)
		b = append(b, ']')
	}
	return append(b, "]}"...)
}

// levelCodes are the intensity levels 0–9 as the TREM XML writes them.
var levelCodes = [...]string{"0", "1", "2", "3", "4", "5-", "5+", "6-", "6+", "7"}

// taipei is the time zone of the XML's EventID.
var taipei = time.FixedZone("Asia/Taipei", 8*3600)

// flashStatus is a flash's status: issued with its first serial, final
// once its detection is, updated between.
func flashStatus(d *rtsv1.Detection) (json, info string) {
	switch {
	case d.GetFinal():
		return "final", "最終"
	case d.GetAreaSerial() <= 1:
		return "issued", "發表"
	}
	return "updated", "更新"
}

// IntensityXML renders a detection's intensity flash as the TREM XML of
// the trem.intensity.v1 topic, the elements intensityV1.ts reads:
//
//	<Report><Head><Title>震度速報</Title><EventID>YYYYMMDDHHMMSS</EventID>
//	<InfoType>發表</InfoType><Serial>n</Serial></Head><Body><Intensity>
//	<Area level="5-"><Town code="971"/>…</Area>…</Intensity></Body></Report>
//
// EventID is the detection's first trigger to the second in Taiwan time,
// the same instant as the v3 JSON's id; levels use JMA's notation; towns
// are postal codes.
func IntensityXML(d *rtsv1.Detection) []byte {
	_, info := flashStatus(d)
	b := []byte(`<?xml version="1.0" encoding="UTF-8"?><Report><Head><Title>震度速報</Title><EventID>`)
	b = time.UnixMilli(d.GetFirstTriggerMs()).In(taipei).AppendFormat(b, "20060102150405")
	b = append(b, `</EventID><InfoType>`...)
	b = append(b, info...)
	b = append(b, `</InfoType><Serial>`...)
	b = strconv.AppendUint(b, uint64(d.GetAreaSerial()), 10)
	b = append(b, `</Serial></Head><Body><Intensity>`...)
	areas := d.GetAreas()
	for level := len(levelCodes) - 1; level >= 1; level-- {
		opened := false
		for _, a := range areas {
			if a.GetLevel() != uint32(level) {
				continue
			}
			if !opened {
				b = append(b, `<Area level="`...)
				b = append(b, levelCodes[level]...)
				b = append(b, `">`...)
				opened = true
			}
			b = append(b, `<Town code="`...)
			b = strconv.AppendUint(b, uint64(a.GetCode()), 10)
			b = append(b, `"/>`...)
		}
		if opened {
			b = append(b, `</Area>`...)
		}
	}
	return append(b, `</Intensity></Body></Report>`...)
}

// IntensityV1 renders the flashes of a snapshot's detections as the JSON of
// the v3 replay /api/v3/trem/intensity/{t} (intensityV1.ts):
//
//	[{"id":s,"serial":n,"status":"issued","ts":ms,"eq":[s],
//	  "area":{"<level>":[code,…]}}]
//
// id is the detection's first trigger in Unix seconds, the same instant as
// the XML's EventID; ts is the tick; eq the origin in Unix seconds.
func IntensityV1(s *rtsv1.Snapshot) []byte {
	b := []byte{'['}
	n := 0
	for _, d := range s.GetDetections() {
		if len(d.GetAreas()) == 0 {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		status, _ := flashStatus(d)
		b = append(b, `{"id":`...)
		b = strconv.AppendInt(b, d.GetFirstTriggerMs()/1000, 10)
		b = append(b, `,"serial":`...)
		b = strconv.AppendUint(b, uint64(d.GetAreaSerial()), 10)
		b = append(b, `,"status":`...)
		b = appendString(b, status)
		b = append(b, `,"ts":`...)
		b = strconv.AppendInt(b, s.GetTimeMs(), 10)
		b = append(b, `,"eq":[`...)
		b = strconv.AppendInt(b, d.GetOriginTimeMs()/1000, 10)
		b = append(b, `],"area":`...)
		b = appendAreasByLevel(b, d.GetAreas())
		b = append(b, '}')
	}
	return append(b, ']')
}

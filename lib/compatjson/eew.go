package compatjson

import (
	"encoding/json"
	"math"
	"strconv"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

// DefaultAuthor is the "author" of the alerts a shindo network issues from
// its own detections unless the deployment names another: TREM-Lite keeps
// only alerts whose author is "trem" or "cwa" (src/js/index/constant.js:128
// of ExpTechTW/TREM-Lite at 9bbaccf), and "trem" is the value it gives a
// network's own alerts.
const DefaultAuthor = "trem"

// Values of an alert's "status", as existing clients read them.
const (
	// StatusWarning (注意報): an earthquake is in progress and the shaking
	// observed so far is below level 4.
	StatusWarning = 0
	// StatusAlert (警報): level 4 (JMA 4) or more has been observed.
	StatusAlert = 1
	// StatusCancel (取消報): TREM-Lite takes 3 as an alert withdrawn
	// (src/js/index/data/data.js:397 and :407 of ExpTechTW/TREM-Lite at
	// 9bbaccf). shindo never issues it: a detection is never withdrawn
	// (one that turns out small simply ends, final).
	StatusCancel = 3
)

// alertLevel is the level from which a detection is an alert, not a
// warning.
const alertLevel = 4

// Status is the "status" of a detection.
func Status(d *rtsv1.Detection) int {
	if d.GetMaxLevel() >= alertLevel {
		return StatusAlert
	}
	return StatusWarning
}

// EEW renders detections as the body of GET /api/v2/eq/eew, an array of
// alerts (SPEC §7):
//
//	[{"author":"trem","id":"…","serial":1,"status":0,"final":0,
//	  "eq":{"time":ms,"lat":f,"lon":f,"depth":f,"mag":f,"loc":"…","max":n},
//	  "time":ms}]
//
// eq.time is the estimated origin time and the outer time the tick of the
// alert's serial, both Unix ms; final is 1 on the last serial of a
// detection. No detection gives [].
func EEW(author string, ds []*rtsv1.Detection) []byte {
	b := make([]byte, 0, 2+len(ds)*220)
	b = append(b, '[')
	for i, d := range ds {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"author":`...)
		b = appendString(b, author)
		b = append(b, `,"id":`...)
		b = appendString(b, d.GetId())
		b = append(b, `,"serial":`...)
		b = strconv.AppendUint(b, uint64(d.GetSerial()), 10)
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(Status(d)), 10)
		b = append(b, `,"final":`...)
		b = appendFlag(b, d.GetFinal())
		b = append(b, `,"eq":{"time":`...)
		b = strconv.AppendInt(b, d.GetOriginTimeMs(), 10)
		b = append(b, `,"lat":`...)
		b = appendFloat64(b, d.GetLat(), 4)
		b = append(b, `,"lon":`...)
		b = appendFloat64(b, d.GetLon(), 4)
		b = append(b, `,"depth":`...)
		b = appendFloat64(b, d.GetDepthKm(), 1)
		b = append(b, `,"mag":`...)
		b = appendFloat64(b, d.GetMagnitude(), 1)
		b = append(b, `,"loc":`...)
		b = appendString(b, d.GetLocation())
		b = append(b, `,"max":`...)
		b = strconv.AppendUint(b, uint64(d.GetMaxLevel()), 10)
		b = append(b, `},"time":`...)
		b = strconv.AppendInt(b, d.GetUpdatedMs(), 10)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendString writes s as a JSON string, whatever bytes it holds.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// appendFloat64 is appendFloat for float64 values.
func appendFloat64(b []byte, f float64, prec int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	p := math.Pow10(prec)
	f = math.Round(f*p) / p
	if f == 0 {
		return append(b, '0')
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

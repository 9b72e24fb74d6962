// Package compatjson renders shindo's internal messages in the JSON of the
// compatible routes of SPEC §7, field for field and type for type, as the
// apps that read them parse it (TREM-Lite, DPIP: docs/COMPATIBILITY.md), so
// they can switch to shindo unchanged. The edges render the live streams
// with it and the cores the replays of past ticks, so a replay is the live
// event byte for byte. Encoding is hand-written: a snapshot of ten thousand
// stations is rendered every 500 ms and shared by every client.
package compatjson

import (
	"math"
	"strconv"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

// RTS renders a snapshot as the body of GET /api/v2/trem/rts:
//
//	{"station":{"<id>":{"pga":f,"pgv":f,"i":f,"I":f,"alert":1}},
//	 "box":{"<areaId>":int},"int":[{"code":int,"i":int}],"time":ms}
//
// alert appears only for triggered stations, as the number 1: DPIP decodes
// it as an integer flag and reads JSON true as false
// (lib/core/models/serialization.dart:8 of ExpTechTW/DPIP at 194d28f).
func RTS(s *rtsv1.Snapshot) []byte {
	b := make([]byte, 0, 64+len(s.GetStations())*72)
	b = append(b, `{"station":{`...)
	for i, st := range s.GetStations() {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, st.GetStationId())
		b = append(b, `:{"pga":`...)
		b = appendFloat(b, st.GetPga(), 3)
		b = append(b, `,"pgv":`...)
		b = appendFloat(b, st.GetPgv(), 3)
		b = append(b, `,"i":`...)
		b = appendFloat(b, st.GetIntensity(), 2)
		b = append(b, `,"I":`...)
		b = appendFloat(b, st.GetDisplayIntensity(), 2)
		if st.GetAlert() {
			b = append(b, `,"alert":1`...)
		}
		b = append(b, '}')
	}
	b = append(b, `},"box":{`...)
	for i, bx := range s.GetBoxes() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = strconv.AppendUint(b, uint64(bx.GetBoxId()), 10)
		b = append(b, `":`...)
		b = strconv.AppendUint(b, uint64(bx.GetLevel()), 10)
	}
	b = append(b, `},"int":[`...)
	for i, a := range s.GetAreas() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"code":`...)
		b = strconv.AppendUint(b, uint64(a.GetCode()), 10)
		b = append(b, `,"i":`...)
		b = strconv.AppendUint(b, uint64(a.GetLevel()), 10)
		b = append(b, '}')
	}
	b = append(b, `],"time":`...)
	b = strconv.AppendInt(b, s.GetTimeMs(), 10)
	return append(b, '}')
}

// appendFloat writes v with at most prec decimals and no trailing zeros;
// values that are not finite (never valid here) are written as 0 to keep
// the document valid JSON.
func appendFloat(b []byte, v float32, prec int) []byte {
	f := float64(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	p := math.Pow10(prec)
	f = math.Round(f*p) / p
	if f == 0 {
		return append(b, '0') // no "-0"
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

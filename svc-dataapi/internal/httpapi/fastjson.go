package httpapi

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"

	datav1 "shindo.dev/gen/shindo/data/v1"
)

// FastJSON is the gateway's marshaler: protojson (runtime.JSONPb) for
// every message, except the report and detection answers — the data API's
// busiest, with up to 500 items — which are written directly, in exactly
// the JSON protojson gives with UseProtoNames and EmitDefaultValues: fields
// in declaration order, 64-bit integers as strings, floats as protojson
// formats them. protojson walks each message by reflection and sorts its
// fields every time, which made it the larger part of a list request's
// cost (docs/BENCHMARKS.md, "Data API"). TestFastJSONMatchesProtojson
// holds the two to the same output.
type FastJSON struct {
	runtime.JSONPb
}

// Marshal implements runtime.Marshaler.
func (m *FastJSON) Marshal(v any) ([]byte, error) {
	switch x := v.(type) {
	case *datav1.ListReportsResponse:
		b := make([]byte, 0, 64+len(x.GetReports())*320)
		b = append(b, `{"reports":[`...)
		for i, r := range x.GetReports() {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendReport(b, r)
		}
		b = append(b, `],"next_page_token":`...)
		b = appendJSONString(b, x.GetNextPageToken())
		return append(b, '}'), nil
	case *datav1.GetReportResponse:
		if x.GetReport() == nil {
			return []byte(`{}`), nil
		}
		b := append(make([]byte, 0, 512), `{"report":`...)
		return append(appendReport(b, x.GetReport()), '}'), nil
	case *datav1.ListDetectionsResponse:
		b := make([]byte, 0, 64+len(x.GetDetections())*320)
		b = append(b, `{"detections":[`...)
		for i, d := range x.GetDetections() {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendDetection(b, d)
		}
		b = append(b, `],"next_page_token":`...)
		b = appendJSONString(b, x.GetNextPageToken())
		return append(b, '}'), nil
	case *datav1.GetDetectionResponse:
		if x.GetDetection() == nil {
			return []byte(`{}`), nil
		}
		b := append(make([]byte, 0, 384), `{"detection":`...)
		return append(appendDetection(b, x.GetDetection()), '}'), nil
	}
	return m.JSONPb.Marshal(v)
}

func appendReport(b []byte, r *datav1.Report) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, r.GetId())
	b = append(b, `,"time_ms":`...)
	b = appendInt64(b, r.GetTimeMs())
	b = append(b, `,"lat":`...)
	b = appendJSONFloat(b, r.GetLat())
	b = append(b, `,"lon":`...)
	b = appendJSONFloat(b, r.GetLon())
	b = append(b, `,"depth_km":`...)
	b = appendJSONFloat(b, r.GetDepthKm())
	b = append(b, `,"magnitude":`...)
	b = appendJSONFloat(b, r.GetMagnitude())
	b = append(b, `,"location":`...)
	b = appendJSONString(b, r.GetLocation())
	b = append(b, `,"max_level":`...)
	b = strconv.AppendUint(b, uint64(r.GetMaxLevel()), 10)
	b = append(b, `,"areas":[`...)
	for i, a := range r.GetAreas() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"code":`...)
		b = strconv.AppendUint(b, uint64(a.GetCode()), 10)
		b = append(b, `,"level":`...)
		b = strconv.AppendUint(b, uint64(a.GetLevel()), 10)
		b = append(b, '}')
	}
	b = append(b, `],"md5":`...)
	b = appendJSONString(b, r.GetMd5())
	b = append(b, `,"source_detection_id":`...)
	b = appendJSONString(b, r.GetSourceDetectionId())
	b = append(b, `,"trem_ms":`...)
	b = appendInt64(b, r.GetTremMs())
	b = append(b, `,"created_ms":`...)
	b = appendInt64(b, r.GetCreatedMs())
	b = append(b, `,"updated_ms":`...)
	b = appendInt64(b, r.GetUpdatedMs())
	return append(b, '}')
}

func appendDetection(b []byte, d *datav1.Detection) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, d.GetId())
	b = append(b, `,"serial":`...)
	b = strconv.AppendUint(b, uint64(d.GetSerial()), 10)
	b = append(b, `,"final":`...)
	b = strconv.AppendBool(b, d.GetFinal())
	b = append(b, `,"origin_time_ms":`...)
	b = appendInt64(b, d.GetOriginTimeMs())
	b = append(b, `,"lat":`...)
	b = appendJSONFloat(b, d.GetLat())
	b = append(b, `,"lon":`...)
	b = appendJSONFloat(b, d.GetLon())
	b = append(b, `,"depth_km":`...)
	b = appendJSONFloat(b, d.GetDepthKm())
	b = append(b, `,"magnitude":`...)
	b = appendJSONFloat(b, d.GetMagnitude())
	b = append(b, `,"location":`...)
	b = appendJSONString(b, d.GetLocation())
	b = append(b, `,"location_code":`...)
	b = strconv.AppendUint(b, uint64(d.GetLocationCode()), 10)
	b = append(b, `,"max_level":`...)
	b = strconv.AppendUint(b, uint64(d.GetMaxLevel()), 10)
	b = append(b, `,"first_trigger_ms":`...)
	b = appendInt64(b, d.GetFirstTriggerMs())
	b = append(b, `,"updated_ms":`...)
	b = appendInt64(b, d.GetUpdatedMs())
	b = append(b, `,"stations":`...)
	b = strconv.AppendUint(b, uint64(d.GetStations()), 10)
	return append(b, '}')
}

// appendInt64 writes a 64-bit integer as protojson does: a JSON string.
func appendInt64(b []byte, v int64) []byte {
	b = append(b, '"')
	b = strconv.AppendInt(b, v, 10)
	return append(b, '"')
}

// appendJSONFloat writes a double as protojson does.
func appendJSONFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-07 → e-7, as encoding/json and protojson write it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONString writes s as protojson does: only control characters,
// quote and backslash escaped; invalid UTF-8 (which the store never
// holds) as U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= ' ' && c != '"' && c != '\\' && c < utf8.RuneSelf {
			b = append(b, c)
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, "\ufffd"...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		b = append(b, '\\')
		switch c {
		case '"', '\\':
			b = append(b, c)
		case '\b':
			b = append(b, 'b')
		case '\f':
			b = append(b, 'f')
		case '\n':
			b = append(b, 'n')
		case '\r':
			b = append(b, 'r')
		case '\t':
			b = append(b, 't')
		default:
			const hex = "0123456789abcdef"
			b = append(b, 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
	}
	return append(b, '"')
}

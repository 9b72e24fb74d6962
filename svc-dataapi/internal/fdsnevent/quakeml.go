package fdsnevent

import (
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"time"

	"shindo.dev/lib/metadb"
)

// The QuakeML 1.2 namespaces: the document's root, and the Basic Event
// Description every other element is in (the default namespace, where
// readers such as seisplotjs and ObsPy look them up).
const (
	nsQuakeML = "http://quakeml.org/xmlns/quakeml/1.2"
	nsBED     = "http://quakeml.org/xmlns/bed/1.2"
)

type eventParameters struct {
	XMLName  xml.Name `xml:"eventParameters"`
	PublicID string   `xml:"publicID,attr"`
	Events   []event  `xml:"event"`
	Creation creation `xml:"creationInfo"`
}

type event struct {
	PublicID             string      `xml:"publicID,attr"`
	PreferredOriginID    string      `xml:"preferredOriginID"`
	PreferredMagnitudeID string      `xml:"preferredMagnitudeID"`
	Type                 string      `xml:"type"`
	Description          description `xml:"description"`
	Creation             creation    `xml:"creationInfo"`
	Origin               origin      `xml:"origin"`
	Magnitude            magnitude   `xml:"magnitude"`
	Amplitudes           []amplitude `xml:"amplitude"`
}

// amplitude is one station's peak of one kind during the event.
type amplitude struct {
	PublicID       string     `xml:"publicID,attr"`
	Generic        value      `xml:"genericAmplitude"`
	Type           string     `xml:"type"`
	Category       string     `xml:"category"`
	Unit           string     `xml:"unit"`
	WaveformID     waveformID `xml:"waveformID"`
	EvaluationMode string     `xml:"evaluationMode"`
	Creation       creation   `xml:"creationInfo"`
}

type waveformID struct {
	Network  string `xml:"networkCode,attr"`
	Station  string `xml:"stationCode,attr"`
	Location string `xml:"locationCode,attr"`
}

// Amplitude types: a station's peaks over the three components of its
// accelerometer, in SI units as QuakeML wants them, and its real-time JMA
// intensity.
const (
	AmpPGA       = "PGA"
	AmpPGV       = "PGV"
	AmpIntensity = "JMA intensity"
)

// amplitudes are the QuakeML amplitudes of a report's station peaks; a
// station no longer registered, whose codes are unknown, has none.
func amplitudes(r *metadb.Report, peaks []metadb.StationPeak, made creation) []amplitude {
	var out []amplitude
	for _, p := range peaks {
		if p.Network == "" || p.Station == "" {
			continue
		}
		wid := waveformID{Network: p.Network, Station: p.Station, Location: p.Location}
		for _, a := range [...]struct {
			kind, unit string
			v          float64
		}{
			{AmpPGA, "m/(s*s)", float64(p.PGAGal) / 100},
			{AmpPGV, "m/s", float64(p.PGVCms) / 100},
			{AmpIntensity, "dimensionless", float64(p.Intensity)},
		} {
			out = append(out, amplitude{
				PublicID: resourceID("amplitude", r.ID+"/"+p.StationID+"/"+strings.ReplaceAll(a.kind, " ", "-")),
				Generic:  value{roundSig(a.v)}, Type: a.kind, Category: "point", Unit: a.unit, WaveformID: wid,
				EvaluationMode: "automatic", Creation: made,
			})
		}
	}
	return out
}

// roundSig rounds to 6 significant digits: a float32 peak's worth.
func roundSig(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return f
}

type description struct {
	Text string `xml:"text"`
	Type string `xml:"type"`
}

type creation struct {
	AgencyID     string `xml:"agencyID"`
	CreationTime string `xml:"creationTime,omitempty"`
}

type value struct {
	Value float64 `xml:"value"`
}

type timeValue struct {
	Value string `xml:"value"`
}

type origin struct {
	PublicID       string    `xml:"publicID,attr"`
	Time           timeValue `xml:"time"`
	Latitude       value     `xml:"latitude"`
	Longitude      value     `xml:"longitude"`
	Depth          value     `xml:"depth"` // m
	DepthType      string    `xml:"depthType,omitempty"`
	EvaluationMode string    `xml:"evaluationMode"`
	Creation       creation  `xml:"creationInfo"`
}

type magnitude struct {
	PublicID       string   `xml:"publicID,attr"`
	Mag            value    `xml:"mag"`
	Type           string   `xml:"type"`
	OriginID       string   `xml:"originID"`
	EvaluationMode string   `xml:"evaluationMode"`
	Creation       creation `xml:"creationInfo"`
}

// writeQuakeML writes the events as a QuakeML 1.2 document made now, with
// the amplitudes of the station peaks in peaks (by report ID; nil for
// none).
func writeQuakeML(w io.Writer, now time.Time, events []metadb.Report, peaks map[string][]metadb.StationPeak) error {
	doc := eventParameters{PublicID: "smi:" + Catalog + "/fdsnws/event/1/query", Creation: creation{AgencyID: Catalog, CreationTime: xmlTime(now)}}
	for i := range events {
		r := &events[i]
		originID, magID := resourceID("origin", r.ID), resourceID("magnitude", r.ID)
		mode, depthType := "manual", ""
		if r.SourceDetectionID != "" {
			mode, depthType = "automatic", "operator assigned"
		}
		made := creation{AgencyID: Catalog, CreationTime: xmlTime(r.UpdatedAt)}
		doc.Events = append(doc.Events, event{
			PublicID: resourceID("event", r.ID), PreferredOriginID: originID, PreferredMagnitudeID: magID,
			Type: "earthquake", Description: description{Text: r.Location, Type: "region name"}, Creation: made,
			Origin: origin{PublicID: originID, Time: timeValue{xmlTime(time.UnixMilli(r.TimeMs))},
				Latitude: value{r.Lat}, Longitude: value{r.Lon}, Depth: value{r.DepthKm * 1000}, DepthType: depthType,
				EvaluationMode: mode, Creation: made},
			Magnitude: magnitude{PublicID: magID, Mag: value{r.Magnitude}, Type: magnitudeType(r), OriginID: originID,
				EvaluationMode: mode, Creation: made},
			Amplitudes: amplitudes(r, peaks[r.ID], made),
		})
	}
	if _, err := io.WriteString(w, xml.Header+`<q:quakeml xmlns:q="`+nsQuakeML+`" xmlns="`+nsBED+`">`+"\n"); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent(" ", " ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n</q:quakeml>\n")
	return err
}

func xmlTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

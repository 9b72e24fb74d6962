package fdsnevent

import (
	"encoding/xml"
	"io"
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

// writeQuakeML writes the events as a QuakeML 1.2 document made now.
func writeQuakeML(w io.Writer, now time.Time, events []metadb.Report) error {
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

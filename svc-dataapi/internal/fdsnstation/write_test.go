package fdsnstation

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/xml"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"shindo.dev/lib/registry"
	"shindo.dev/seismo/seedcode"
)

// encodeXML is what writeXML must equal: encoding/xml's Encoder over the
// structures of stationxml.go, as the handler used it.
func encodeXML(t *testing.T, doc *document) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := xml.NewEncoder(&b)
	enc.Indent("", " ")
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestWriteXMLIsEncodingXML: for every level, over the test stations and
// one whose name and network description hold every character XML
// escapes (and a byte that is not UTF-8), writeXML writes exactly what
// encoding/xml writes.
func TestWriteXMLIsEncodingXML(t *testing.T) {
	t.Parallel()
	list := testSet(t).All()
	key := hex.EncodeToString(make([]byte, 32))
	list = append(list, &registry.Station{ID: "odd", Name: "<a & \"b\"> 'c'\t\n\r\xff 花蓮", Lat: -0.5, Lon: 1e-7, Elevation: 1234.5,
		KeyID: 1, KeyHex: key, Created: created, SEED: seedcode.Codes{Network: "ZZ", Station: "ODD", Location: "10"}, ScaleGal: 1.0 / 3})
	set, err := registry.NewSet(list)
	if err != nil {
		t.Fatal(err)
	}
	h := New(func() *registry.Set { return set }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.Network = map[string]string{"ZZ": "a & b < c > \"d\" 'e'"}
	// Attributes the registry cannot hold, and empty elements.
	total := 0
	odd := []network{{node: node{Code: "X\"&<>'", AlternateCode: "a\tb\nc"}, Stations: []station{{node: node{Code: ""},
		TotalNumberChannels: &total, Channels: []channel{{node: node{Code: "HNZ"}, Sensor: &equipment{}, Response: &response{}}}}}}}
	for _, level := range []string{"network", "station", "channel", "response", "odd"} {
		var nets []network
		if level == "odd" {
			nets = odd
		} else {
			req, err := parse(httptest.NewRequest(http.MethodGet, Base+"query?level="+level, nil))
			if err != nil {
				t.Fatal(err)
			}
			nets = h.collect(req, level)
		}
		doc := document{SchemaVersion: SchemaVersion, Source: "shindo", Sender: "shindo", Module: "shindo fdsnws-station " + Version,
			ModuleURI: "http://x/?a=1&b=<2>", Created: xmlTime(created), Networks: nets}
		if len(doc.Networks) == 0 {
			t.Fatalf("level=%s: nothing", level)
		}
		var got bytes.Buffer
		bw := bufio.NewWriter(&got)
		if err := writeXML(bw, &doc); err != nil {
			t.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		if want := encodeXML(t, &doc); !bytes.Equal(got.Bytes(), want) {
			i := 0
			for i < min(got.Len(), len(want)) && got.Bytes()[i] == want[i] {
				i++
			}
			t.Errorf("level=%s: differs from encoding/xml at byte %d:\n got …%q\nwant …%q", level, i,
				got.Bytes()[max(0, i-80):min(got.Len(), i+80)], want[max(0, i-80):min(len(want), i+80)])
		}
	}
}

package e2e

// Models of the apps that read shindo's compatible routes, each following
// the app's own code, rule for rule, with the file and line it comes from:
//
//   - TREM-Lite, JavaScript, commit 9bbaccf of ExpTechTW/TREM-Lite (main;
//     its released 3.2.3 polls, its HEAD streams);
//   - TREM-Lite's TypeScript rewrite (packages/core/src at 44ea535, the
//     generation that reads /api/v2/trem/rts and /api/v2/eq/eew);
//   - DPIP, commit 194d28f of ExpTechTW/DPIP.
//
// Nothing of theirs is copied: the models are written from reading their
// source, and they fail where the apps would drop, misread or throw.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ---------------------------------------------------------------------
// Raw HTTP/1.1 streaming: each chunk of a chunked body is one read, as a
// browser's fetch reader gets what arrived together. The edge writes each
// batch of events as one chunk.

// chunkStream opens url with headers and returns its chunks.
func chunkStream(ctx context.Context, t testing.TB, rawURL string, header map[string]string) (status int, hdr http.Header, chunks <-chan []byte) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatalf("%s: %v", rawURL, err)
	}
	go func() { <-ctx.Done(); conn.Close() }()
	var req strings.Builder
	fmt.Fprintf(&req, "GET %s HTTP/1.1\r\nHost: %s\r\n", u.RequestURI(), u.Host)
	for k, v := range header {
		fmt.Fprintf(&req, "%s: %s\r\n", k, v)
	}
	req.WriteString("\r\n")
	if _, err := conn.Write([]byte(req.String())); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: %v", rawURL, err)
	}
	out := make(chan []byte, 64)
	go func() {
		defer close(out)
		defer conn.Close()
		if resp.TransferEncoding == nil || resp.TransferEncoding[0] != "chunked" {
			// A document, not a stream: one read of everything.
			b, _ := io.ReadAll(resp.Body)
			out <- b
			return
		}
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			n, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
			if err != nil || n == 0 {
				return
			}
			b := make([]byte, n)
			if _, err := io.ReadFull(br, b); err != nil {
				return
			}
			br.Discard(2)
			select {
			case out <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	return resp.StatusCode, resp.Header, out
}

// ---------------------------------------------------------------------
// TREM-Lite JS, HEAD: the stream parser of src/js/index/data/http.js:55-97
// driven by readLoop (http.js:207-251). It splits on "\n\n" only, takes
// the first `data:` line of a block (/^data:\s*(.+)$/m, :81) and
// JSON.parses it (:84); named events are not told apart. Its generator
// yields several times for one next(chunk): a read that finds it paused
// on a yield gets that yield's value and its own chunk is lost. So a chunk
// with k events takes k+2 reads (each event, then the raw chunk, then
// nothing); a chunk without one takes 2 (the raw chunk, then nothing).

// tremJSStream is the parser's state for one stream.
type tremJSStream struct {
	buffer  string
	pending []any // what the next reads get, their own chunks discarded
}

// read is one reader.read(): what the handler is given, or nil.
func (p *tremJSStream) read(chunk []byte) any {
	if len(p.pending) > 0 {
		v := p.pending[0]
		p.pending = p.pending[1:]
		return v
	}
	p.buffer += string(chunk)
	blocks := strings.Split(p.buffer, "\n\n")
	p.buffer = blocks[len(blocks)-1]
	var events []any
	for _, b := range blocks[:len(blocks)-1] {
		m := tremDataLine.FindStringSubmatch(strings.TrimSpace(b))
		if m == nil {
			continue
		}
		var v any
		if json.Unmarshal([]byte(m[1]), &v) == nil && v != nil {
			events = append(events, v)
		}
	}
	// After the events, the raw chunk (the handler JSON.parses all of it,
	// data.js:259-267), then nothing.
	out := append(events, rawChunk(chunk), nil)
	p.pending = out[1:]
	return out[0]
}

// rawChunk is a chunk handed to the handler as bytes: data.js parses it
// whole, which succeeds only for a chunk that is one JSON document.
type rawChunk []byte

var tremDataLine = regexp.MustCompile(`(?m)^data:\s*(.+)$`)

// tremValue is what TREM-Lite's handlers make of a delivered value
// (data.js:255-275): a parsed event, or a raw chunk that parses whole.
func tremValue(v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, false
	case rawChunk:
		var out any
		if json.Unmarshal(x, &out) != nil {
			return nil, false
		}
		return out, true
	}
	return v, true
}

// ---------------------------------------------------------------------
// TREM-Lite's EEW rules (src/js/index/data/data.js:341-425; the TS
// rewrite's data.ts has the same, packages/core/src/features/data/data.ts
// at 44ea535): alerts older than 240 s by eq.time are dropped; the first
// sight of an id is a release only for authors in EEW_AUTHOR
// (constant.js:128: trem, cwa); later sights are updates only with a
// higher serial.

type tremEEW struct {
	author  []string
	seen    map[string]int // id → serial taken
	release []string       // ids released, in order
	updates int
	now     func() time.Time
}

func newTremEEW(authors ...string) *tremEEW {
	return &tremEEW{author: authors, seen: map[string]int{}, now: time.Now}
}

// process is processEEWData on one delivered value: an array of alerts
// (Array.from of anything else is []).
func (m *tremEEW) process(t testing.TB, v any) {
	list, ok := v.([]any)
	if !ok {
		return
	}
	for _, x := range list {
		a, ok := x.(map[string]any)
		if !ok {
			continue
		}
		eq, _ := a["eq"].(map[string]any)
		eqTime, _ := eq["time"].(float64)
		// data.js:369-371: no eq.time, or older than 240 s: ignored.
		if eqTime == 0 || m.now().UnixMilli()-int64(eqTime) > 240_000 {
			continue
		}
		// eew.js:248: eq.mag.toFixed(1) throws on anything but a number.
		if _, ok := eq["mag"].(float64); !ok {
			t.Errorf("TREM-Lite: eq.mag %#v is not a number: eew.js:248 throws", eq["mag"])
		}
		id := fmt.Sprint(a["id"])
		serial, _ := a["serial"].(float64)
		author, _ := a["author"].(string)
		last, known := m.seen[id]
		switch {
		case !known:
			if slices.Contains(m.author, author) {
				m.seen[id] = 1 // data.js:383: always 1 at first sight
				m.release = append(m.release, id)
			}
		case int(serial) > last:
			m.seen[id] = int(serial)
			m.updates++
		}
	}
}

// ---------------------------------------------------------------------
// TREM-Lite's intensity and LPGM rules (data.js:449-556): an intensity is
// released at the first sight of its id (a number, Unix ms, expiring 600 s
// after it), updated with a higher serial and different areas; an LPGM at
// the first sight of its id.

type tremFlash struct {
	intensity map[float64]float64 // id → serial
	lpgm      map[float64]bool
	released  int
	lpgmFirst []any
}

func newTremFlash() *tremFlash {
	return &tremFlash{intensity: map[float64]float64{}, lpgm: map[float64]bool{}}
}

func (m *tremFlash) processIntensity(t testing.TB, v any) {
	list, ok := v.([]any)
	if !ok {
		t.Errorf("TREM-Lite 3.2.3: intensity body %T is not an array (data.js:344 forEach throws)", v)
		return
	}
	for _, x := range list {
		a, _ := x.(map[string]any)
		id, ok := a["id"].(float64)
		if !ok || time.Since(time.UnixMilli(int64(id))) > 600*time.Second {
			t.Errorf("TREM-Lite: intensity id %#v is not a Unix ms time of the last 10 minutes (data.js:455)", a["id"])
			continue
		}
		if end, _ := a["IntensityEnd"].(float64); end != 0 {
			continue // data.js:456
		}
		area, ok := a["area"].(map[string]any)
		if !ok {
			t.Errorf("TREM-Lite: intensity area %#v is not an object (intensity.js:78)", a["area"])
			continue
		}
		for level, codes := range area {
			if l, err := strconv.Atoi(level); err != nil || l < 1 || l > 9 {
				t.Errorf("TREM-Lite: area level %q", level)
			}
			if _, ok := codes.([]any); !ok {
				t.Errorf("TREM-Lite: area codes %#v are not an array", codes)
			}
		}
		serial, _ := a["serial"].(float64)
		if _, known := m.intensity[id]; !known {
			m.released++
		}
		m.intensity[id] = serial
	}
}

func (m *tremFlash) processLPGM(t testing.TB, v any, stations map[string]bool) {
	list, ok := v.([]any)
	if !ok {
		t.Errorf("TREM-Lite 3.2.3: lpgm body %T is not an array (data.js:406)", v)
		return
	}
	for _, x := range list {
		a, _ := x.(map[string]any)
		id, ok := a["id"].(float64)
		if !ok || id == 0 {
			t.Errorf("TREM-Lite: lpgm id %#v (data.js:534 Number(id))", a["id"])
			continue
		}
		entries, _ := a["list"].([]any)
		for _, e := range entries {
			s, _ := e.(map[string]any)
			sid, _ := s["id"].(string)
			level, _ := s["lpgm"].(float64)
			if !stations[sid] || level < 1 || level > 4 || level != float64(int(level)) {
				t.Errorf("TREM-Lite: lpgm entry %v: a listed station with a class 1–4 (lpgm.js:62-93)", s)
			}
		}
		if !m.lpgm[id] {
			m.lpgm[id] = true
			m.lpgmFirst = append(m.lpgmFirst, a)
		}
	}
}

// ---------------------------------------------------------------------
// TREM-Lite TS, the generation of dataHttp.ts at 44ea535: makeSseReader
// (features/data/dataHttp.ts:45-65) splits on "\n\n" without removing
// "\r", trims each block and JSON.parses its first `data:` line; it keeps
// the partial block for the next chunk, so no event is lost.

type tremTSStream struct{ buffer string }

func (p *tremTSStream) read(chunk []byte) []any {
	p.buffer += string(chunk)
	blocks := strings.Split(p.buffer, "\n\n")
	p.buffer = blocks[len(blocks)-1]
	var out []any
	for _, b := range blocks[:len(blocks)-1] {
		m := tremDataLine.FindStringSubmatch(strings.TrimSpace(b))
		if m == nil {
			continue
		}
		var v any
		if json.Unmarshal([]byte(m[1]), &v) == nil && v != nil {
			out = append(out, v)
		}
	}
	return out
}

// ---------------------------------------------------------------------
// DPIP's SSE client (lib/core/network/sse_client.dart:71-117): lines split
// on \n, \r\n or \r; a blank line dispatches a frame that had a field;
// `:` lines are comments; "field: value" with one leading space dropped;
// event, data (joined with \n), retry; id ignored. sse_realtime_source.dart
// :184-212: event "g" is base64(gzip(JSON)), a default event plain JSON,
// "info" only logged.

type dpipFrame struct {
	event, data string
	retry       int
}

// dpipFrames reads a DPIP stream's frames.
func dpipFrames(r io.Reader, out chan<- dpipFrame) {
	defer close(out)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 32<<20)
	sc.Split(dpipLines)
	var f dpipFrame
	var data []string
	dirty := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if dirty {
				f.data = strings.Join(data, "\n")
				out <- f
			}
			f, data, dirty = dpipFrame{}, nil, false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		dirty = true
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			f.event = value
		case "data":
			data = append(data, value)
		case "retry":
			if n, err := strconv.Atoi(value); err == nil {
				f.retry = n
			}
		}
	}
}

// dpipLines splits as Dart's LineSplitter: \n, \r\n or \r.
func dpipLines(data []byte, atEOF bool) (int, []byte, error) {
	for i, c := range data {
		switch c {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 == len(data) && !atEOF {
				return 0, nil, nil
			}
			if i+1 < len(data) && data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// dpipPayload is the JSON a frame carries for DPIP, or "" for none.
func dpipPayload(f dpipFrame) (string, error) {
	switch f.event {
	case "g":
		z, err := base64.StdEncoding.DecodeString(strings.TrimSpace(f.data))
		if err != nil {
			return "", fmt.Errorf("event g: base64: %w", err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(z))
		if err != nil {
			return "", fmt.Errorf("event g: gzip: %w", err)
		}
		b, err := io.ReadAll(zr)
		return string(b), err
	case "", "message":
		return f.data, nil
	}
	return "", nil // info and others: logged, not data
}

// DPIP's decoders (the json_serializable code of lib/features/earthquake/
// domain/*.g.dart): a required field missing or of another JSON type
// throws, and the whole frame is dropped.

// dpipNum is `(json[k] as num)`: a number; ints are nums too.
func dpipNum(m map[string]any, k string, required bool) error {
	v, ok := m[k]
	if !ok || v == nil {
		if required {
			return fmt.Errorf("%s missing", k)
		}
		return nil
	}
	if _, ok := v.(float64); !ok {
		return fmt.Errorf("%s is %T, not a number", k, v)
	}
	return nil
}

// dpipInt is `(json[k] as num).toInt()` for a field the app uses as an
// integer: shindo must send an integer.
func dpipInt(m map[string]any, k string, required bool) error {
	if err := dpipNum(m, k, required); err != nil {
		return err
	}
	if f, ok := m[k].(float64); ok && f != float64(int64(f)) {
		return fmt.Errorf("%s is %v, not an integer", k, f)
	}
	return nil
}

func dpipString(m map[string]any, k string) error {
	if _, ok := m[k].(string); !ok {
		return fmt.Errorf("%s is %T, not a string", k, m[k])
	}
	return nil
}

// dpipRTS decodes an RTS object as rts.g.dart:9-33 does and returns the
// triggered stations (alert decoded by boolishInt, serialization.dart:8:
// only 1 or "1" is true).
func dpipRTS(raw string) (triggered int, err error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return 0, fmt.Errorf("not an object: %w", err)
	}
	st, ok := m["station"].(map[string]any)
	if !ok {
		return 0, fmt.Errorf("station is %T, not an object", m["station"])
	}
	if _, ok := m["box"].(map[string]any); !ok {
		return 0, fmt.Errorf("box is %T, not an object", m["box"])
	}
	if _, ok := m["int"].([]any); !ok {
		return 0, fmt.Errorf("int is %T, not an array", m["int"])
	}
	if err := dpipInt(m, "time", false); err != nil {
		return 0, err
	}
	for id, v := range st {
		s, ok := v.(map[string]any)
		if !ok {
			return 0, fmt.Errorf("station %s is %T", id, v)
		}
		for _, k := range []string{"pga", "pgv", "i", "I"} {
			if err := dpipNum(s, k, false); err != nil {
				return 0, fmt.Errorf("station %s: %w", id, err)
			}
		}
		if a, present := s["alert"]; present {
			if a != float64(1) {
				return 0, fmt.Errorf("station %s: alert %#v is not 1: DPIP reads it as false", id, a)
			}
			triggered++
		}
	}
	return triggered, nil
}

// dpipShown is the alerts of a decoded list DPIP shows
// (lib/features/earthquake/data/eew_realtime_source.dart:41-45 and
// domain/eew.dart:33-38 at 194d28f3): never JMA's, and with its "CWA only"
// setting — on by default since 12440307 — only CWA's. Ours say "trem"
// (docs/COMPATIBILITY.md): a DPIP user sees them after choosing all
// sources (所有來源).
func dpipShown(list []map[string]any, cwaOnly bool) []map[string]any {
	var shown []map[string]any
	for _, a := range list {
		agency := strings.ToLower(a["author"].(string))
		if agency != "jma" && (!cwaOnly || agency == "cwa") {
			shown = append(shown, a)
		}
	}
	return shown
}

// dpipEEW decodes an alert list as eew.g.dart:9-35 does.
func dpipEEW(raw string) ([]map[string]any, error) {
	var list []map[string]any
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		return nil, fmt.Errorf("not an array of objects: %w", err)
	}
	for _, a := range list {
		for _, k := range []string{"author", "id"} {
			if err := dpipString(a, k); err != nil {
				return nil, err
			}
		}
		for _, k := range []string{"serial", "status"} {
			if err := dpipInt(a, k, true); err != nil {
				return nil, err
			}
		}
		if f, present := a["final"]; present && f != float64(0) && f != float64(1) {
			return nil, fmt.Errorf("final %#v: DPIP reads only 1 as final", f)
		}
		eq, ok := a["eq"].(map[string]any)
		if !ok {
			return nil, errors.New("eq missing")
		}
		for _, k := range []string{"time", "max"} {
			if err := dpipInt(eq, k, true); err != nil {
				return nil, fmt.Errorf("eq.%w", err)
			}
		}
		for _, k := range []string{"lon", "lat", "depth", "mag"} {
			if err := dpipNum(eq, k, true); err != nil {
				return nil, fmt.Errorf("eq.%w", err)
			}
		}
		if err := dpipString(eq, "loc"); err != nil {
			return nil, fmt.Errorf("eq.%w", err)
		}
	}
	return list, nil
}

// dpipReportRow decodes a report list row (partial_earthquake_report.g.dart
// :11-22): every field required.
func dpipReportRow(r map[string]any) error {
	for _, k := range []string{"id", "loc", "md5"} {
		if err := dpipString(r, k); err != nil {
			return err
		}
	}
	for _, k := range []string{"lon", "lat", "depth", "mag"} {
		if err := dpipNum(r, k, true); err != nil {
			return err
		}
	}
	for _, k := range []string{"int", "time", "trem"} {
		if err := dpipInt(r, k, true); err != nil {
			return err
		}
	}
	return nil
}

// dpipReport decodes a report (earthquake_report.g.dart:9-58): the row's
// fields but md5 and int, and list {county: {int, town: {name: {lon, lat,
// int}}}}.
func dpipReport(r map[string]any) error {
	for _, k := range []string{"id", "loc"} {
		if err := dpipString(r, k); err != nil {
			return err
		}
	}
	for _, k := range []string{"lon", "lat", "depth", "mag"} {
		if err := dpipNum(r, k, true); err != nil {
			return err
		}
	}
	for _, k := range []string{"time", "trem"} {
		if err := dpipInt(r, k, true); err != nil {
			return err
		}
	}
	list, ok := r["list"].(map[string]any)
	if !ok {
		return fmt.Errorf("list is %T, not an object", r["list"])
	}
	for county, v := range list {
		c, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("list.%s is %T", county, v)
		}
		if err := dpipInt(c, "int", true); err != nil {
			return fmt.Errorf("list.%s.%w", county, err)
		}
		towns, ok := c["town"].(map[string]any)
		if !ok {
			return fmt.Errorf("list.%s.town is %T", county, c["town"])
		}
		for name, tv := range towns {
			tw, ok := tv.(map[string]any)
			if !ok {
				return fmt.Errorf("town %s is %T", name, tv)
			}
			for _, k := range []string{"lon", "lat"} {
				if err := dpipNum(tw, k, true); err != nil {
					return fmt.Errorf("town %s: %w", name, err)
				}
			}
			if err := dpipInt(tw, "int", true); err != nil {
				return fmt.Errorf("town %s: %w", name, err)
			}
		}
	}
	return nil
}

// tremReportPlace is what TREM-Lite's report speech extracts from a
// report's loc (src/js/index/core/audio.js:303: /位於(.+?)(?=\))/, which
// throws when it does not match), written in Go's syntax.
func tremReportPlace(loc string) (string, bool) {
	m := regexp.MustCompile(`位於(.+?)\)`).FindStringSubmatch(loc)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// ---------------------------------------------------------------------
// TREM-Lite TS, the newest generation (dataHttp.ts, rtsV1.ts and
// intensityV1.ts at 2400a0e/b120a76/2c552ae): GET /api/v1/trem/sse with
// named events. frameReader deletes every \r and splits on "\n\n";
// parseFrame takes event and data fields (data lines joined with \n) and
// `:` comments; a frame with neither data nor event is skipped. The first
// frame with one makes the connection "up" (READY_MS 10 s).

type tremV1Frame struct{ event, data, id string }

type tremV1Stream struct{ buffer string }

func (p *tremV1Stream) read(chunk []byte) []tremV1Frame {
	p.buffer += strings.ReplaceAll(string(chunk), "\r", "")
	blocks := strings.Split(p.buffer, "\n\n")
	p.buffer = blocks[len(blocks)-1]
	var out []tremV1Frame
	for _, b := range blocks[:len(blocks)-1] {
		var f tremV1Frame
		var data []string
		for _, line := range strings.Split(b, "\n") {
			if line == "" || strings.HasPrefix(line, ":") {
				continue
			}
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				f.event = value
			case "data":
				data = append(data, value)
			case "id": // not read by the app; kept to compare with replays
				f.id = value
			}
		}
		f.data = strings.Join(data, "\n")
		if f.data != "" || f.event != "" {
			out = append(out, f)
		}
	}
	return out
}

// tremV1Payload is decodePayload (rtsV1.ts:58-70): base64 of gzip, or the
// data as it is when it is not.
func tremV1Payload(data string) string {
	compact := strings.Join(strings.Fields(data), "")
	z, err := base64.StdEncoding.DecodeString(compact)
	if err != nil || len(z) < 2 || z[0] != 0x1f || z[1] != 0x8b {
		return data
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return data
	}
	b, _ := io.ReadAll(zr)
	return string(b)
}

// tremRTSv1 is readRtsV1 (rtsV1.ts:83-112): no stations, no frame; a
// station without a numeric i is skipped; alert only for 1, "1" or true.
func tremRTSv1(payload string) (stations, alerting int, err error) {
	var p struct {
		TS       *float64                  `json:"ts"`
		Stations map[string]map[string]any `json:"stations"`
		EQ       []any                     `json:"eq"`
	}
	if err := json.Unmarshal([]byte(payload), &p); err != nil {
		return 0, 0, err
	}
	if p.Stations == nil {
		return 0, 0, errors.New("no stations: the frame is dropped")
	}
	for id, s := range p.Stations {
		if _, ok := s["i"].(float64); !ok {
			return 0, 0, fmt.Errorf("station %s: i %#v is not a number", id, s["i"])
		}
		stations++
		if a := s["alert"]; a == float64(1) || a == "1" || a == true {
			alerting++
		}
	}
	for _, e := range p.EQ {
		q, ok := e.([]any)
		if !ok || len(q) < 4 {
			return 0, 0, fmt.Errorf("eq entry %#v: four numbers", e)
		}
	}
	return stations, alerting, nil
}

var (
	xmlHead   = regexp.MustCompile(`<Head>([\s\S]*?)</Head>`)
	xmlID     = regexp.MustCompile(`<EventID>(\d{14})</EventID>`)
	xmlSerial = regexp.MustCompile(`<Serial>(\d+)</Serial>`)
	xmlArea   = regexp.MustCompile(`<Area level="([^"]+)">([\s\S]*?)</Area>`)
	xmlTown   = regexp.MustCompile(`<Town code="(\d+)"`)
)

// tremIntensityXML is readIntensityXml (intensityV1.ts:58-82): the Head's
// EventID (14 digits, +08:00) and Serial, or no report; the towns of each
// Area by JMA level.
func tremIntensityXML(xml string) (id time.Time, serial int, towns int, ok bool) {
	head := xmlHead.FindStringSubmatch(xml)
	if head == nil {
		return time.Time{}, 0, 0, false
	}
	stamp, s := xmlID.FindStringSubmatch(head[1]), xmlSerial.FindStringSubmatch(head[1])
	if stamp == nil || s == nil {
		return time.Time{}, 0, 0, false
	}
	id, err := time.ParseInLocation("20060102150405", stamp[1], time.FixedZone("", 8*3600))
	if err != nil {
		return time.Time{}, 0, 0, false
	}
	serial, _ = strconv.Atoi(s[1])
	levels := []string{"1", "2", "3", "4", "5-", "5+", "6-", "6+", "7"}
	for _, m := range xmlArea.FindAllStringSubmatch(xml, -1) {
		if slices.Contains(levels, m[1]) {
			towns += len(xmlTown.FindAllStringSubmatch(m[2], -1))
		}
	}
	return id, serial, towns, true
}

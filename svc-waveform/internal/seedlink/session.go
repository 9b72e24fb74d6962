package seedlink

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// transport is one client connection: TCP or WebSocket.
type transport interface {
	// readLine returns the next command line, without its terminator.
	readLine() (string, error)
	// write sends one reply or packet (one WebSocket message).
	write(parts ...[]byte) error
	// beginStream tells the transport that data flow begins.
	beginStream()
	// writePackets sends data packets, each given as two parts (header,
	// record): over TCP in one write, over WebSocket one message each.
	writePackets(parts [][]byte) error
}

// errBye ends a session the client asked to end.
var errBye = errors.New("client said BYE")

// reqStation is what a client asked of the stations one STATION pattern
// names.
type reqStation struct {
	pattern   string
	selectors []selector
	mseed3    bool   // some selector asks for miniSEED 3
	seq       uint64 // first sequence number wanted; 0 with hasSeq false: from now
	seq24     bool   // seq is SeedLink 3's low 24 bits, resolved per station
	hasSeq    bool
	start     time.Time // zero: no time window
	end       time.Time
}

// session is one client's negotiation and data flow, whatever its
// transport.
type session struct {
	srv   *Server
	t     transport
	proto int

	batch     bool
	extReply  bool
	userAgent string

	// pending are data packets (header, record) not yet written: a
	// client's packets go out together, one write per wake-up rather than
	// one per record.
	pending [][]byte

	stations []*reqStation
	current  *reqStation // the last STATION, until DATA, FETCH or TIME ends it
	global   reqStation  // all-station mode: no STATION given
	fetch    bool        // ENDFETCH or FETCH: send what is held, then END

	// For INFO CONNECTIONS: the connection (nil over WebSocket, which is
	// never trusted), how it is carried, the client's address, when it
	// came, what it was sent.
	conn              net.Conn
	kind, remote      string
	connected         time.Time
	txPackets, txByte atomic.Uint64
	view              atomic.Pointer[sessionView] // after each command
}

// sessionView is what INFO CONNECTIONS shows of a session's negotiation,
// published whole after each command: other sessions read it.
type sessionView struct {
	agent, version string
	requests       []reqStation
}

func (s *session) publishView() {
	v := &sessionView{agent: s.userAgent, version: fmt.Sprintf("%d.%d", s.proto, map[int]int{3: 1, 4: 0}[s.proto])}
	for _, r := range s.stations {
		v.requests = append(v.requests, reqStation{pattern: r.pattern, selectors: slices.Clone(r.selectors)})
	}
	if len(s.stations) == 0 && len(s.global.selectors) > 0 {
		v.requests = append(v.requests, reqStation{pattern: "*", selectors: slices.Clone(s.global.selectors)})
	}
	s.view.Store(v)
}

func newSession(srv *Server, t transport) *session {
	return &session{srv: srv, t: t, proto: 3}
}

// run negotiates and then streams until the client leaves, falls behind
// or the server stops.
func (s *session) run(stop <-chan struct{}) error {
	for {
		line, err := s.t.readLine()
		if err != nil {
			return err
		}
		start, err := s.command(line)
		s.publishView()
		if err != nil {
			return err
		}
		if start {
			s.t.beginStream()
			return s.stream(stop)
		}
	}
}

// command handles one negotiation command; start is true when data flow
// begins.
func (s *session) command(line string) (start bool, err error) {
	words, ok := fields(line)
	if len(words) == 0 {
		return false, nil
	}
	s.srv.m.commands.WithLabelValues(commandLabel(words[0])).Inc()
	if !ok {
		return false, s.fail("ARGUMENTS", "too many arguments")
	}
	verb, args := strings.ToUpper(words[0]), words[1:]
	switch verb {
	case "HELLO":
		return false, s.t.write([]byte(s.srv.helloLine() + "\r\n" + s.srv.organization() + "\r\n"))
	case "SLPROTO":
		if len(args) != 1 {
			return false, s.fail("UNSUPPORTED", "unsupported protocol version")
		}
		switch {
		case args[0] == "4.0":
			s.proto = 4
		case strings.HasPrefix(args[0], "3."):
			s.proto = 3
		default:
			return false, s.fail("UNSUPPORTED", "unsupported protocol version")
		}
		return false, s.ok()
	case "USERAGENT":
		s.userAgent = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), words[0]))
		return false, s.ok()
	case "CAPABILITIES":
		for _, a := range args {
			if strings.EqualFold(a, "EXTREPLY") {
				s.extReply = true
			}
		}
		return false, s.ok()
	case "BATCH":
		err := s.reply("OK")
		s.batch = true
		return false, err
	case "AUTH":
		return false, s.fail("UNSUPPORTED", "no authentication is needed here")
	case "STATION":
		if len(s.stations) >= maxStations {
			return false, s.fail("LIMIT", "station limit reached")
		}
		p, err := stationPattern(s.proto, args)
		if err != nil {
			return false, s.fail("ARGUMENTS", err.Error())
		}
		s.current = &reqStation{pattern: p}
		s.stations = append(s.stations, s.current)
		return false, s.ok()
	case "SELECT":
		return false, s.selectCmd(args)
	case "DATA", "FETCH":
		if verb == "FETCH" && s.proto == 4 {
			return false, s.unknown(line)
		}
		return s.dataCmd(verb, args)
	case "TIME":
		if s.proto == 4 {
			return false, s.unknown(line)
		}
		return s.timeCmd(args)
	case "END":
		return true, nil
	case "ENDFETCH":
		s.fetch = true
		return true, nil
	case "INFO":
		return false, s.info(args)
	case "BYE":
		return false, errBye
	case "CAT":
		return false, s.t.write([]byte("CAT command not implemented\r\n"))
	}
	return false, s.unknown(line)
}

func (s *session) unknown(line string) error {
	if len(line) > 50 {
		line = line[:50]
	}
	return s.fail("UNSUPPORTED", "unrecognized command: "+line)
}

// target is the request a SELECT, DATA or TIME applies to.
func (s *session) target() *reqStation {
	if s.current != nil {
		return s.current
	}
	return &s.global
}

func (s *session) selectCmd(args []string) error {
	switch {
	case len(args) == 0:
		return s.fail("ARGUMENTS", "SELECT requires a pattern")
	case s.proto == 3 && len(args) > 1:
		return s.fail("ARGUMENTS", "SELECT requires a single argument")
	}
	r := s.target()
	var sels []selector
	for _, a := range args {
		sel, err := parseSelector(s.proto, a)
		if err != nil {
			return s.fail("ARGUMENTS", err.Error())
		}
		sels = append(sels, sel)
	}
	if len(r.selectors)+len(sels) > maxSelectors {
		return s.fail("LIMIT", "too many SELECT patterns")
	}
	r.selectors = append(r.selectors, sels...)
	for _, sel := range sels {
		r.mseed3 = r.mseed3 || sel.mseed3
	}
	return s.ok()
}

// dataCmd: protocol 3 DATA|FETCH [seq_hex [start]], protocol 4 DATA
// [seq|ALL [start [end]]]. After STATION it sets where that station
// starts; without, it starts the data flow for all stations.
func (s *session) dataCmd(verb string, args []string) (bool, error) {
	limit := 2
	if s.proto == 4 {
		limit = 3
	}
	if len(args) > limit {
		return false, s.fail("ARGUMENTS", "too many arguments for "+verb)
	}
	r := s.target()
	if len(args) >= 1 {
		switch {
		case s.proto == 4 && strings.EqualFold(args[0], "ALL"):
			// Everything held: the ring, or from the start time given.
			r.hasSeq, r.seq = len(args) == 1, 0
		case s.proto == 4:
			n, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil {
				return false, s.fail("ARGUMENTS", "invalid sequence number")
			}
			r.hasSeq, r.seq = true, n
		default:
			n, ok := parseSeq3(args[0])
			if !ok {
				return false, s.fail("ARGUMENTS", "invalid sequence number")
			}
			r.hasSeq, r.seq, r.seq24 = true, n, true
		}
	}
	if len(args) >= 2 {
		t, err := parseTime(args[1])
		if err != nil {
			return false, s.fail("ARGUMENTS", "error parsing start time")
		}
		r.start = t
	}
	if len(args) >= 3 {
		t, err := parseTime(args[2])
		if err != nil {
			return false, s.fail("ARGUMENTS", "error parsing end time")
		}
		r.end = t
	}
	if verb == "FETCH" {
		s.fetch = true
	}
	return s.endStation()
}

// parseSeq3 reads protocol 3's 24-bit hexadecimal sequence number. A "0x"
// prefix is taken, as ringserver's strtoull takes it (src/cmdtoken.c,
// cmdtoken_u32): ObsPy's SeedLinkConnection resumes with Python's hex() of
// the last sequence it got plus one (client/seedlinkconnection.py,
// negotiate_station) — "DATA 0xdf5ea", and 0x1000000 after 0xFFFFFF,
// which is 0 again.
func parseSeq3(arg string) (uint64, bool) {
	if len(arg) > 2 && arg[0] == '0' && (arg[1] == 'x' || arg[1] == 'X') {
		arg = arg[2:]
	}
	n, err := strconv.ParseUint(arg, 16, 32)
	if err != nil || n > 0x1000000 {
		return 0, false
	}
	return n & 0xFFFFFF, true
}

// endStation ends a STATION's negotiation after its DATA, FETCH or TIME.
// Outside a STATION, the command starts the data flow at once, without a
// reply, as ringserver does: seisplotjs's SeedLink 3 client resumes by
// sending "DATA seq" after its STATION and SELECT commands this way, and
// a client that gave no STATION at all takes every station.
func (s *session) endStation() (bool, error) {
	if s.current != nil {
		s.current = nil
		return false, s.ok()
	}
	return true, nil
}

// timeCmd: protocol 3 TIME start [end].
func (s *session) timeCmd(args []string) (bool, error) {
	if len(args) < 1 || len(args) > 2 {
		return false, s.fail("ARGUMENTS", "TIME command requires 1 or 2 arguments")
	}
	start, err := parseTime(args[0])
	if err != nil {
		return false, s.fail("ARGUMENTS", "error parsing start time")
	}
	if start.After(s.srv.now()) {
		return false, s.fail("ARGUMENTS", "start time cannot be in the future")
	}
	var end time.Time
	if len(args) == 2 {
		if end, err = parseTime(args[1]); err != nil {
			return false, s.fail("ARGUMENTS", "error parsing end time")
		}
	}
	r := s.target()
	r.start, r.end = start, end
	return s.endStation()
}

func (s *session) ok() error {
	if s.batch {
		return nil
	}
	return s.reply("OK")
}

func (s *session) reply(msg string) error { return s.t.write([]byte(msg + "\r\n")) }

// fail answers a refused command; the session goes on.
func (s *session) fail(code, msg string) error {
	s.srv.m.refused.WithLabelValues(code).Inc()
	if s.batch {
		return nil
	}
	switch {
	case s.proto == 4:
		return s.reply("ERROR " + code + " " + msg)
	case s.extReply:
		return s.reply("ERROR\r" + code + " " + msg)
	}
	return s.reply("ERROR")
}

// request returns the request that covers a station: the first STATION
// pattern naming it, or the all-station request.
func (s *session) request(key StationKey) *reqStation {
	if len(s.stations) == 0 {
		return &s.global
	}
	for _, r := range s.stations {
		if matchStation(r.pattern, key) {
			return r
		}
	}
	return nil
}

// resolveSeq turns a request's first sequence number into this station's
// 64-bit one: SeedLink 3's 24 bits are placed at or below the station's
// latest number, as ringserver maps them into its packet IDs.
func resolveSeq(r *reqStation, latest uint64) uint64 {
	if !r.seq24 {
		return r.seq
	}
	full := latest&^0xFFFFFF | r.seq
	if full > latest+1 && full >= 1<<24 {
		full -= 1 << 24
	}
	return full
}

// stream sends the requested backlog, then live records, until the
// client leaves or falls behind.
func (s *session) stream(stop <-chan struct{}) error {
	cache := map[StationKey]*reqStation{}
	requestOf := func(key StationKey) *reqStation {
		r, ok := cache[key]
		if !ok {
			r = s.request(key)
			cache[key] = r
		}
		return r
	}
	// wants runs under the ring's lock, from other goroutines too: it
	// must not share the cache.
	wants := func(key StationKey) bool { return s.request(key) != nil }
	// firstSeq is where each station with a requested sequence number
	// starts, also for live records: a core behind the one the client
	// left sends nothing the client had.
	firstSeq := map[StationKey]uint64{}
	first := func(key StationKey, r *reqStation, latest uint64) uint64 {
		if !r.hasSeq {
			return 0
		}
		n, ok := firstSeq[key]
		if !ok {
			n = resolveSeq(r, latest)
			firstSeq[key] = n
		}
		return n
	}
	var older []Held // stations whose request reaches back before the ring
	// held are the stations the ring held at the subscription; a station
	// that comes later (the ring of a svc-waveform that just restarted
	// starts empty) gets its archive when its first frame arrives.
	heldAt := map[StationKey]bool{}
	sub, backlog := s.srv.ring.subscribe(wants, s.srv.opts.ClientBuffer, func(held Held) func(*entry) bool {
		heldAt[held.Key] = true
		r := s.request(held.Key)
		switch {
		case r.hasSeq:
			n := first(held.Key, r, held.Latest)
			if n > 0 && timeOf(n) < max(held.SensorFromMs, held.IntensityFromMs-intensityMs) {
				older = append(older, held)
			}
			return func(e *entry) bool { return e.last >= n }
		case !r.start.IsZero():
			if r.start.UnixMilli() < max(held.SensorFromMs, held.IntensityFromMs-intensityMs) {
				older = append(older, held)
			}
			return func(e *entry) bool { _, end := e.span(); return end.After(r.start) }
		}
		return func(*entry) bool { return false }
	})
	defer s.srv.ring.unsubscribe(sub)
	s.srv.m.streaming.Inc()
	defer s.srv.m.streaming.Dec()

	// The client may ask for INFO or say BYE while data flows.
	cmds := make(chan error, 1)
	go func() {
		for {
			line, err := s.t.readLine()
			if err != nil {
				cmds <- err
				return
			}
			words, _ := fields(line)
			if len(words) == 0 {
				continue
			}
			switch strings.ToUpper(words[0]) {
			case "BYE":
				cmds <- errBye
				return
			case "INFO":
				if err := s.info(words[1:]); err != nil {
					cmds <- err
					return
				}
			default:
				// ringserver ignores commands during data flow, too.
				s.srv.m.refused.WithLabelValues("UNEXPECTED").Inc()
			}
		}
	}()

	if err := s.backfill(older, requestOf, firstSeq, nil); err != nil {
		return err
	}
	for _, d := range backlog {
		if err := s.send(d, requestOf(d.key), firstSeq[d.key]); err != nil {
			return err
		}
	}
	if err := s.flush(); err != nil {
		return err
	}
	if s.fetch {
		if err := s.t.write([]byte("END")); err != nil {
			return err
		}
		return errFetched
	}
	// A session whose every request ends at a time is done once each
	// station it got data of has passed that time: END, and the
	// connection closes, as ringserver ends a time window.
	windowed := !s.global.end.IsZero()
	if len(s.stations) > 0 {
		windowed = !slices.ContainsFunc(s.stations, func(r *reqStation) bool { return r.end.IsZero() })
	}
	passed := map[StationKey]bool{} // stations in the window: whether their data passed its end
	note := func(d delivery, r *reqStation) {
		if windowed {
			start, _ := d.e.span()
			passed[d.key] = passed[d.key] || !start.Before(r.end)
		}
	}
	for _, d := range backlog {
		if r := requestOf(d.key); r != nil {
			note(d, r)
		}
	}
	done := func() bool {
		if !windowed || len(passed) == 0 {
			return false
		}
		for _, p := range passed {
			if !p {
				return false
			}
		}
		return true
	}
	if done() {
		return s.endWindow()
	}
	late := map[StationKey]*sentTo{}
	for {
		select {
		case d := <-sub.c:
			// This delivery and whatever else is waiting, in one write.
			for more := true; more; {
				if r := requestOf(d.key); r != nil {
					n := first(d.key, r, d.e.last)
					if !heldAt[d.key] && len(late) < maxBackfillStations {
						heldAt[d.key] = true
						b, err := s.lateBackfill(d, r, firstSeq)
						if err != nil {
							return err
						}
						if b != nil {
							late[d.key] = b
						}
					}
					if b := late[d.key]; b == nil || !b.covers(d.e) {
						if err := s.send(d, r, n); err != nil {
							return err
						}
					}
					note(d, r)
				}
				select {
				case d = <-sub.c:
				default:
					more = false
				}
			}
			if err := s.flush(); err != nil {
				return err
			}
			if done() {
				return s.endWindow()
			}
		case <-sub.dropped:
			s.srv.m.dropped.Inc()
			return errSlowClient
		case err := <-cmds:
			return err
		case <-stop:
			return nil
		}
	}
}

// endWindow ends a session whose time windows all passed.
func (s *session) endWindow() error {
	s.srv.log.Debug("seedlink: time window complete")
	if err := s.t.write([]byte("END")); err != nil {
		return err
	}
	return errWindowEnded
}

// sentTo is how far a late backfill sent a station's frames: sensor
// samples up to Sensor (ms, exclusive), intensity windows ending up to
// Intensity. Live frames below are the archive's, already sent.
type sentTo struct{ Sensor, Intensity int64 }

func (b *sentTo) note(e *entry) {
	if e.Sensor {
		b.Sensor = max(b.Sensor, e.FirstMs+int64(len(e.UD))*sampleMs)
	} else {
		b.Intensity = max(b.Intensity, e.FirstMs)
	}
}

// covers reports whether a live frame was sent already by the backfill.
func (b *sentTo) covers(e *entry) bool {
	if e.Sensor {
		return e.FirstMs < b.Sensor
	}
	return e.FirstMs <= b.Intensity
}

// lateBackfill sends, before the first frame of a station the ring did
// not hold at the subscription, what the archive holds between where the
// station's request starts and that frame, and returns how far it went.
func (s *session) lateBackfill(d delivery, r *reqStation, firstSeq map[StationKey]uint64) (*sentTo, error) {
	from := r.start.UnixMilli()
	if r.hasSeq {
		from = timeOf(firstSeq[d.key])
	}
	if (!r.hasSeq && r.start.IsZero()) || from >= timeOf(d.e.first) {
		return nil, nil // from now on, or nothing missing before this frame
	}
	h := Held{Key: d.key, ID: d.e.Station, Latest: d.e.last, SensorFromMs: math.MaxInt64, IntensityFromMs: math.MaxInt64}
	if d.e.Sensor {
		h.SensorFromMs = d.e.FirstMs
	} else {
		h.IntensityFromMs = d.e.FirstMs
	}
	b := &sentTo{Sensor: math.MinInt64, Intensity: math.MinInt64}
	err := s.backfill([]Held{h}, func(StationKey) *reqStation { return r }, firstSeq, map[StationKey]*sentTo{d.key: b})
	return b, err
}

// Bounds of what the archive adds in front of the ring, for one session.
const (
	// maxBackfillStations is the most stations a session gets archive
	// data for; a request of more starts with what the ring holds.
	maxBackfillStations = 16
	// maxBackfill is how far back before the ring a session may start.
	maxBackfill = 24 * time.Hour
	// backfillStep is one archive read: its Query's longest window.
	backfillStep = time.Hour
)

// backfill sends what the archive holds of the stations in held from
// where their requests start to where the ring's frames begin, oldest
// first; the ring's and the live records follow. Live frames wait in the
// subscription meanwhile.
func (s *session) backfill(held []Held, requestOf func(StationKey) *reqStation, firstSeq map[StationKey]uint64, sent map[StationKey]*sentTo) error {
	if s.srv.opts.Archive == nil || len(held) == 0 {
		return nil
	}
	if len(held) > maxBackfillStations {
		s.srv.m.backfills.WithLabelValues("too_many_stations").Inc()
		return nil
	}
	for _, h := range held {
		r := requestOf(h.Key)
		from := r.start.UnixMilli()
		if r.hasSeq {
			from = timeOf(firstSeq[h.Key])
		}
		// Up to the later of the ring's two starts (one kind may be
		// missing: MaxInt64); each kind is cut at its own below.
		to := max(h.SensorFromMs, h.IntensityFromMs)
		if to == math.MaxInt64 {
			to = min(h.SensorFromMs, h.IntensityFromMs)
		}
		if to == math.MaxInt64 {
			continue
		}
		from = max(from, to-maxBackfill.Milliseconds())
		for at := from; at < to; at += backfillStep.Milliseconds() {
			frames, err := s.srv.opts.Archive(h.ID, at, min(at+backfillStep.Milliseconds(), to))
			if err != nil {
				s.srv.m.backfills.WithLabelValues("failed").Inc()
				s.srv.log.Warn("seedlink: archive read failed", "station", h.ID, "error", err)
				break
			}
			var es []*entry
			for _, f := range frames {
				// Only what the ring does not hold: samples before its
				// first sensor frame, windows before its first intensity.
				if f.Sensor {
					if n := (h.SensorFromMs - f.FirstMs) / sampleMs; n <= 0 {
						continue
					} else if n < int64(len(f.UD)) {
						f.UD, f.NS, f.EW = f.UD[:n], f.NS[:n], f.EW[:n]
					}
				} else if f.FirstMs >= h.IntensityFromMs {
					continue
				}
				if e, ok := newEntry(f); ok {
					es = append(es, e)
				}
			}
			slices.SortFunc(es, func(a, b *entry) int { return cmp.Compare(a.first, b.first) })
			// Records read back are cut anew: each channel starts where
			// the request does, the sample at or after its time or the
			// number at or after its sequence number.
			trim := firstSeq[h.Key]
			if !r.hasSeq {
				trim = uint64((r.start.UnixMilli()+sampleMs-1)/sampleMs) * slotsPerTick
			}
			for _, e := range es {
				if err := s.sendRecords(delivery{h.Key, e}, r, trim, trim); err != nil {
					return err
				}
				if b := sent[h.Key]; b != nil {
					b.note(e)
				}
			}
			s.srv.m.backfills.WithLabelValues("read").Inc()
		}
	}
	return s.flush()
}

var (
	errSlowClient = errors.New("client fell behind")
	// errFetched ends a FETCH session once what was held is sent.
	errFetched = errors.New("fetch complete")
	// errWindowEnded ends a session whose time windows all passed.
	errWindowEnded = errors.New("time window complete")
)

// send writes an entry's records that the request selects: from first on
// (0: all) and within its time window.
func (s *session) send(d delivery, r *reqStation, first uint64) error {
	return s.sendRecords(d, r, first, 0)
}

// sendRecords is send with the channels cut at trim (records' from).
func (s *session) sendRecords(d delivery, r *reqStation, first, trim uint64) error {
	if r == nil {
		return nil
	}
	formats := []byte{mseed2}
	if r.mseed3 {
		formats = append(formats, mseed3)
	}
	for _, f := range formats {
		var recs []record
		var err error
		if trim == 0 {
			recs, err = d.e.encoded(d.key, f)
		} else {
			recs, err = records(d.key, d.e, func(st Stream) bool { return keeps(r.selectors, st) && (!r.mseed3 || formatOf(r.selectors, st) == f) }, trim, f)
		}
		if err != nil {
			s.srv.m.unencodable.Inc()
			s.srv.log.Warn("seedlink: frame not encodable", "station", d.key.ID(), "format", string(f), "error", err)
		}
		for _, rec := range recs {
			if rec.seq < first || !keeps(r.selectors, rec.stream) || r.mseed3 && formatOf(r.selectors, rec.stream) != f {
				continue
			}
			if !r.start.IsZero() && !rec.end.After(r.start) {
				continue
			}
			if !r.end.IsZero() && !rec.start.Before(r.end) {
				continue
			}
			h := s.header(d.key, rec)
			s.pending = append(s.pending, h, rec.data)
			s.srv.m.records.Inc()
			s.txPackets.Add(1)
			s.txByte.Add(uint64(len(h) + len(rec.data)))
			if len(s.pending) >= 2*maxPending {
				if err := s.flush(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// maxPending is the most data packets written at once.
const maxPending = 256

// flush writes the pending packets.
func (s *session) flush() error {
	if len(s.pending) == 0 {
		return nil
	}
	err := s.t.writePackets(s.pending)
	clear(s.pending)
	s.pending = s.pending[:0]
	return err
}

// header is the SeedLink header of a data packet: protocol 3's "SL" and
// six hex digits, protocol 4's "SE" header with the format ('2' or '3',
// miniSEED 2 or 3), subformat 'D', payload length, 64-bit sequence and
// station ID.
func (s *session) header(key StationKey, rec record) []byte {
	if s.proto == 3 {
		return fmt.Appendf(nil, "SL%06X", rec.seq&0xFFFFFF)
	}
	id := key.ID()
	h := make([]byte, 17, 17+len(id))
	copy(h, "SE")
	h[2], h[3] = rec.format, 'D'
	binary.LittleEndian.PutUint32(h[4:], uint32(len(rec.data)))
	binary.LittleEndian.PutUint64(h[8:], rec.seq)
	h[16] = byte(len(id))
	return append(h, id...)
}

// commandLabel bounds the metric's label values to the known verbs.
func commandLabel(verb string) string {
	switch v := strings.ToUpper(verb); v {
	case "HELLO", "SLPROTO", "USERAGENT", "CAPABILITIES", "BATCH", "AUTH", "STATION", "SELECT",
		"DATA", "FETCH", "TIME", "END", "ENDFETCH", "INFO", "BYE", "CAT":
		return v
	}
	return "other"
}

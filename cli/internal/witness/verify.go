package witness

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	waveformv1 "shindo.dev/gen/shindo/waveform/v1"
)

const (
	// queryWindow is the longest window Verify asks an archive for; the
	// archive takes up to an hour.
	queryWindow = 15 * 60 * 1000
	// queryTimeout bounds one Query.
	queryTimeout = 10 * time.Second
	// pollInterval is the pause between passes while frames are missing.
	pollInterval = time.Second
	// maxExamples is how many pieces of evidence a core report keeps.
	maxExamples = 20
)

// Report is the outcome of Verify.
type Report struct {
	Stations []string
	// From and To bound the frames checked: the first sample of the first
	// sensor frame and the end of the last frame.
	From, To time.Time
	// Sent and Acked count the packets (intensity and sensor) as in Stats.
	Sent, Acked int
	// Cores holds each archive's result by site name.
	Cores map[string]CoreReport
	// Passes is how many times the archives were read.
	Passes int
	Took   time.Duration
}

// CoreReport is what one core's archive holds of the witness's packets.
type CoreReport struct {
	// Checked counts acked packets looked for, Missing those not found
	// whole. Duplicated counts frames stored more than once (samples
	// repeated in the answer, an intensity frame listed twice, a frame's
	// samples found again at another time); Corrupt frames with values
	// other than those sent and data where no frame was sent. Both count
	// unacked packets as well: whatever is stored must be stored right.
	Checked, Missing, Duplicated, Corrupt int
	// FoundUnacked counts packets no uplink saw acked that are in the
	// archive all the same (an ack lost on the way back): no violation.
	FoundUnacked int
	// Examples is evidence, at most 20 lines: station, frame time, what.
	Examples []string
	// Err is why part of the archive could not be read by the end of the
	// settle time (the frames of that part are neither checked nor
	// counted missing).
	Err string
}

// Violations lists what breaks the invariant, one line per core and
// finding; none means every acked packet is in every archive once, right.
// A run in which nothing was acked proves nothing and is a violation too.
func (r Report) Violations() []string {
	var out []string
	if r.Acked == 0 {
		out = append(out, fmt.Sprintf("no packet was acked (%d sent): nothing is proven", r.Sent))
	}
	if len(r.Cores) == 0 {
		out = append(out, "no archive was checked")
	}
	for _, site := range slices.Sorted(maps.Keys(r.Cores)) {
		c := r.Cores[site]
		eg := ""
		if len(c.Examples) > 0 {
			eg = "; e.g. " + c.Examples[0]
		}
		if c.Err != "" {
			out = append(out, fmt.Sprintf("%s: archive not fully read: %s", site, c.Err))
		}
		if c.Missing > 0 {
			out = append(out, fmt.Sprintf("%s: %d of %d acked packets missing%s", site, c.Missing, c.Checked, eg))
		}
		if c.Duplicated > 0 {
			out = append(out, fmt.Sprintf("%s: %d packets stored more than once%s", site, c.Duplicated, eg))
		}
		if c.Corrupt > 0 {
			out = append(out, fmt.Sprintf("%s: %d packets stored with wrong values%s", site, c.Corrupt, eg))
		}
	}
	return out
}

// String summarises the report in one line.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d stations, %d packets sent, %d acked, %s to %s", len(r.Stations), r.Sent, r.Acked,
		r.From.UTC().Format(time.TimeOnly), r.To.UTC().Format(time.TimeOnly))
	for _, site := range slices.Sorted(maps.Keys(r.Cores)) {
		c := r.Cores[site]
		fmt.Fprintf(&b, "; %s: %d checked, %d missing, %d duplicated, %d corrupt, %d found unacked",
			site, c.Checked, c.Missing, c.Duplicated, c.Corrupt, c.FoundUnacked)
		if c.Err != "" {
			fmt.Fprintf(&b, " (%s)", c.Err)
		}
	}
	return b.String()
}

// expectation is what one station sent within one query window, for one
// check of an archive's answer.
type expectation struct {
	station    string
	start, end int64             // the query window [start, end)
	sensor     map[int64]*packet // by first_sample_ms
	intensity  map[int64]*packet // by window_end_ms
	// span holds, by kind, the first and the last frame the station sent
	// in the whole run: what the archive holds outside them belongs to
	// another run (the last intensity frame of the run before may end
	// where this run's first sensor frame starts).
	span [2][2]int64
}

// Verify reads every core's archive for the witness's frames, again and
// again (a pass a second) until every acked frame is found in all of them
// or settle has passed, and returns the last pass's findings. Call it
// after Stop: a packet whose ack comes later than the call is not looked
// for.
func (w *Witness) Verify(ctx context.Context, settle time.Duration) Report {
	began := time.Now()
	rep := Report{Cores: map[string]CoreReport{}}
	var plan []expectation
	from, to := int64(0), int64(0)
	w.mu.Lock()
	for _, st := range w.stations {
		rep.Stations = append(rep.Stations, st.id)
		for _, p := range st.sent {
			rep.Sent++
			if p.ackedBy != 0 {
				rep.Acked++
			}
		}
		plan = append(plan, planStation(st)...)
	}
	w.mu.Unlock()
	for _, e := range plan {
		if from == 0 || e.start < from {
			from = e.start
		}
		to = max(to, e.end)
	}
	rep.From, rep.To = time.UnixMilli(from), time.UnixMilli(to)

	conns := map[string]waveformv1.WaveformServiceClient{}
	for site, addr := range w.cfg.Waveform {
		creds := w.cfg.GRPC
		if creds == nil {
			creds = insecure.NewCredentials()
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			rep.Cores[site] = CoreReport{Err: fmt.Sprintf("waveform %s: %v", addr, err)}
			continue
		}
		defer conn.Close()
		conns[site] = waveformv1.NewWaveformServiceClient(conn)
	}

	deadline := began.Add(settle)
	lastLog := time.Now()
	for {
		rep.Passes++
		complete := true
		for site, client := range conns {
			c := checkArchive(ctx, client, plan)
			rep.Cores[site] = c
			if c.Missing > 0 || c.Err != "" {
				complete = false
			}
		}
		rep.Took = time.Since(began)
		if complete || time.Now().After(deadline) || ctx.Err() != nil {
			w.cfg.Log.Info("witness verified", slog.String("report", rep.String()), slog.Int("violations", len(rep.Violations())))
			return rep
		}
		if time.Since(lastLog) >= 5*time.Second {
			w.cfg.Log.Info("witness waiting for the archives", slog.String("report", rep.String()),
				slog.Duration("left", time.Until(deadline).Round(time.Second)))
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
		case <-time.After(pollInterval):
		}
	}
}

// planStation splits what a station sent into query windows of at most
// queryWindow, covering its frames from the first sample of the first to
// the end of the last. w.mu is held.
func planStation(st *station) []expectation {
	if len(st.sent) == 0 {
		return nil
	}
	lo, hi := int64(0), int64(0)
	var span [2][2]int64
	for _, p := range st.sent {
		a, b := p.ms, p.ms+frameMs // a sensor frame's samples
		if p.kind == intensity {
			a, b = p.ms, p.ms+1
		}
		if lo == 0 || a < lo {
			lo = a
		}
		hi = max(hi, b)
		if sp := &span[p.kind]; sp[0] == 0 || p.ms < sp[0] {
			sp[0] = p.ms
		}
		span[p.kind][1] = max(span[p.kind][1], p.ms)
	}
	var out []expectation
	for a := lo; a < hi; a += queryWindow {
		out = append(out, expectation{station: st.id, start: a, end: min(a+queryWindow, hi),
			sensor: map[int64]*packet{}, intensity: map[int64]*packet{}, span: span})
	}
	for _, p := range st.sent {
		e := &out[(p.ms-lo)/queryWindow]
		c := *p // a copy: acks may still arrive while Verify runs
		if p.kind == intensity {
			e.intensity[p.ms] = &c
		} else {
			e.sensor[p.ms] = &c
		}
	}
	return out
}

// checkArchive queries one archive for every window of the plan and adds
// up the findings.
func checkArchive(ctx context.Context, client waveformv1.WaveformServiceClient, plan []expectation) CoreReport {
	var total CoreReport
	for _, e := range plan {
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		resp, err := client.Query(qctx, &waveformv1.QueryRequest{StationId: e.station, StartMs: e.start, EndMs: e.end, WithIntensity: true})
		cancel()
		if status.Code(err) == codes.NotFound {
			resp, err = &waveformv1.QueryResponse{}, nil // the archive never heard of the station
		}
		if err != nil {
			total.Err = fmt.Sprintf("query %s [%d, %d): %v", e.station, e.start, e.end, err)
			continue
		}
		c := check(e, resp)
		total.Checked += c.Checked
		total.Missing += c.Missing
		total.Duplicated += c.Duplicated
		total.Corrupt += c.Corrupt
		total.FoundUnacked += c.FoundUnacked
		for _, x := range c.Examples {
			if len(total.Examples) < maxExamples {
				total.Examples = append(total.Examples, x)
			}
		}
	}
	return total
}

// slot is what an answer holds of one 500 ms sensor frame.
type slot struct {
	have       [frameSamples]bool
	ns, ew, ud [frameSamples]int32
	count      int    // samples present
	repeated   int    // samples present more than once
	bad        string // why the slot's chunk cannot be right
}

// intensitySlot is what an answer holds of one intensity frame.
type intensitySlot struct {
	n                   int
	intensity, pga, pgv float32
}

// check compares one answer with what the station sent in its window.
func check(e expectation, resp *waveformv1.QueryResponse) CoreReport {
	var c CoreReport
	note := func(kind kind, ms int64, what string, p *packet) {
		if len(c.Examples) >= maxExamples {
			return
		}
		line := fmt.Sprintf("%s %s %s (%s): %s", e.station, kind, msField(kind, ms), time.UnixMilli(ms).UTC().Format("15:04:05.000Z"), what)
		if p != nil {
			line += "; " + ackedText(p)
		}
		c.Examples = append(c.Examples, line)
	}

	slots := map[int64]*slot{}
	for _, ch := range resp.GetChunks() {
		n := min(len(ch.GetNs()), len(ch.GetEw()), len(ch.GetUd()))
		var bad string
		switch {
		case ch.GetRateHz() != rateHz:
			bad = fmt.Sprintf("chunk at %d has rate %d Hz", ch.GetFirstSampleMs(), ch.GetRateHz())
		case len(ch.GetNs()) != n || len(ch.GetEw()) != n || len(ch.GetUd()) != n:
			bad = fmt.Sprintf("chunk at %d has %d/%d/%d samples on its axes", ch.GetFirstSampleMs(), len(ch.GetNs()), len(ch.GetEw()), len(ch.GetUd()))
		case ch.GetScaleGal() != scaleGal:
			bad = fmt.Sprintf("chunk at %d has scale %g gal, sent %g", ch.GetFirstSampleMs(), ch.GetScaleGal(), scaleGal)
		case ch.GetStationId() != "" && ch.GetStationId() != e.station:
			bad = fmt.Sprintf("chunk at %d is of station %q", ch.GetFirstSampleMs(), ch.GetStationId())
		}
		for j := range n {
			t := ch.GetFirstSampleMs() + int64(j)*samplePeriod
			if t < e.start || t >= e.end {
				continue // the archive answers for the window asked, no more
			}
			at := floorDiv(t, frameMs) * frameMs
			s := slots[at]
			if s == nil {
				s = &slot{}
				slots[at] = s
			}
			off := t - at
			if off%samplePeriod != 0 {
				s.bad = fmt.Sprintf("a sample at %d, off the 20 ms grid", t)
				continue
			}
			if bad != "" {
				s.bad = bad
			}
			i := off / samplePeriod
			if s.have[i] {
				s.repeated++
				continue
			}
			s.have[i], s.count = true, s.count+1
			s.ns[i], s.ew[i], s.ud[i] = ch.GetNs()[j], ch.GetEw()[j], ch.GetUd()[j]
		}
	}

	for _, at := range slices.Sorted(keysUnion(e.sensor, slots)) {
		if at < e.span[sensor][0] || at > e.span[sensor][1] {
			continue
		}
		c.tally(sensor, at, e.sensor[at], sensorVerdict(e.station, at, e.sensor[at], slots[at]), note)
	}

	ints := map[int64]*intensitySlot{}
	for _, x := range resp.GetIntensity() {
		t := x.GetWindowEndMs()
		if t < e.start || t >= e.end {
			continue
		}
		s := ints[t]
		if s == nil {
			s = &intensitySlot{intensity: x.GetIntensity(), pga: x.GetPgaGal(), pgv: x.GetPgvCms()}
			ints[t] = s
		}
		s.n++
	}
	for _, at := range slices.Sorted(keysUnion(e.intensity, ints)) {
		if at < e.span[intensity][0] || at > e.span[intensity][1] {
			continue
		}
		c.tally(intensity, at, e.intensity[at], intensityVerdict(e.station, at, e.intensity[at], ints[at]), note)
	}
	return c
}

// verdict is what an answer holds of one frame: nothing, or the frame
// with what is wrong with it.
type verdict struct {
	present bool
	twice   string // why it counts as stored more than once
	wrong   string // why its values are not those sent
	partial string // what is missing of it
}

// tally counts the verdict on the frame at ms that p sent (nil: none was
// sent there) and notes the evidence.
func (c *CoreReport) tally(k kind, ms int64, p *packet, v verdict, note func(kind, int64, string, *packet)) {
	acked := p != nil && p.ackedBy != 0
	if acked {
		c.Checked++
	}
	switch {
	case !v.present:
		if acked {
			c.Missing++
			note(k, ms, "missing", p)
		}
	case v.twice != "":
		c.Duplicated++
		note(k, ms, v.twice, p)
	case v.wrong != "":
		c.Corrupt++
		note(k, ms, v.wrong, p)
	case v.partial != "":
		if acked {
			c.Missing++
			note(k, ms, v.partial, p)
		}
	case !acked:
		c.FoundUnacked++
	}
}

// sensorVerdict judges the samples s an answer holds where p's sensor
// frame (nil: none) starts at firstMs.
func sensorVerdict(station string, firstMs int64, p *packet, s *slot) verdict {
	switch {
	case s == nil:
		return verdict{}
	case s.repeated > 0:
		return verdict{present: true, twice: fmt.Sprintf("%d samples in the answer twice", s.repeated)}
	case s.bad != "":
		return verdict{present: true, wrong: s.bad}
	}
	origin, known := sensorOrigin(station, firstMs, &s.have, &s.ns, &s.ew, &s.ud)
	switch {
	case p == nil && known:
		return verdict{present: true, twice: fmt.Sprintf("holds the samples of the frame at first_sample_ms=%d again", origin)}
	case p == nil:
		return verdict{present: true, wrong: fmt.Sprintf("%d samples where no frame was sent", s.count)}
	case !sensorRight(station, firstMs, s) && known:
		return verdict{present: true, wrong: fmt.Sprintf("holds the samples of the frame at first_sample_ms=%d instead", origin)}
	case !sensorRight(station, firstMs, s):
		return verdict{present: true, wrong: "values other than those sent"}
	case s.count < frameSamples:
		return verdict{present: true, partial: fmt.Sprintf("only %d of %d samples", s.count, frameSamples)}
	}
	return verdict{present: true}
}

// intensityVerdict judges the intensity frame s an answer holds at
// window_end_ms endMs, where p's frame (nil: none) ends.
func intensityVerdict(station string, endMs int64, p *packet, s *intensitySlot) verdict {
	switch {
	case s == nil:
		return verdict{}
	case s.n > 1:
		return verdict{present: true, twice: fmt.Sprintf("in the answer %d times", s.n)}
	case endMs%frameMs != 0:
		return verdict{present: true, wrong: "off the 500 ms grid"}
	}
	origin, known := intensityOrigin(station, endMs, s.intensity, s.pga, s.pgv)
	i, a, v := intensityValues(station, endMs)
	switch {
	case p == nil && known:
		return verdict{present: true, twice: fmt.Sprintf("holds the frame ending at %d again", origin)}
	case p == nil:
		return verdict{present: true, wrong: "a frame where none was sent"}
	case (s.intensity != i || s.pga != a || s.pgv != v) && known:
		return verdict{present: true, wrong: fmt.Sprintf("holds the frame ending at %d instead", origin)}
	case s.intensity != i || s.pga != a || s.pgv != v:
		return verdict{present: true, wrong: fmt.Sprintf("intensity %g, PGA %g, PGV %g; sent %g, %g, %g", s.intensity, s.pga, s.pgv, i, a, v)}
	}
	return verdict{present: true}
}

// sensorRight reports whether the samples present in s are those sent for
// the frame at firstMs.
func sensorRight(station string, firstMs int64, s *slot) bool {
	tag, k := stationTag(station), frameIndex(firstMs)
	for i := range frameSamples {
		if !s.have[i] {
			continue
		}
		if n, e, u := sample(tag, k, i); s.ns[i] != n || s.ew[i] != e || s.ud[i] != u {
			return false
		}
	}
	return true
}

func msField(k kind, ms int64) string {
	if k == intensity {
		return fmt.Sprintf("window_end_ms=%d", ms)
	}
	return fmt.Sprintf("first_sample_ms=%d", ms)
}

// ackedText names the uplinks that acked p.
func ackedText(p *packet) string {
	var by []string
	for i, name := range []string{Primary, Backup} {
		if p.ackedBy&(1<<i) != 0 {
			by = append(by, name)
		}
	}
	if len(by) == 0 {
		return "not acked"
	}
	return "acked on " + strings.Join(by, " and ")
}

// keysUnion yields the keys of a and of b, each once.
func keysUnion[A, B any](a map[int64]A, b map[int64]B) iter.Seq[int64] {
	return func(yield func(int64) bool) {
		for k := range a {
			if !yield(k) {
				return
			}
		}
		for k := range b {
			if _, dup := a[k]; dup {
				continue
			}
			if !yield(k) {
				return
			}
		}
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

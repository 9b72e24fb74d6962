package archive

import (
	"errors"
	"fmt"

	"shindo.dev/seismo/seedcode"
)

// Span is a stretch of a channel without a gap, [StartMs, EndMs): EndMs is
// just after its last sample.
type Span struct{ StartMs, EndMs int64 }

// ChannelSpans are one channel's stretches in a window.
type ChannelSpans struct {
	Channel string  // SEED code
	RateHz  float64 // samples per second
	Spans   []Span  // in time order
}

// ErrTooManySpans is Availability's answer beyond its budget.
var ErrTooManySpans = errors.New("too many spans")

// Availability returns, for station id, the stretches without a gap that
// channels chans hold in [startMs, endMs), cut to the window (and to the
// retention), from the archive's index of what it holds — no file is read.
// Samples not yet in a record count, as Query returns them. Channels with
// nothing in the window are left out. At most *budget spans are returned,
// and *budget is lowered by as many; beyond it the answer is
// ErrTooManySpans.
func (s *Store) Availability(id string, chans []int, startMs, endMs int64, budget *int) (seedcode.Codes, []ChannelSpans, error) {
	if startMs < 0 || endMs <= startMs {
		return seedcode.Codes{}, nil, fmt.Errorf("%w: end must be after start", ErrWindow)
	}
	startMs = max(startMs, s.opts.Now().UnixMilli()-s.opts.Retention.Milliseconds())
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stations[id]
	if st == nil {
		return seedcode.Codes{}, nil, ErrUnknownStation
	}
	codes := seedcode.Codes{Network: st.net, Station: st.sta, Location: st.loc}
	var out []ChannelSpans
	for _, c := range chans {
		k := &kinds[c]
		a, b := ceilDiv(startMs, k.periodMs), ceilDiv(endMs, k.periodMs)
		var spans []Span
		cov := &st.ch[c].cov
		for i := cov.find(a + 1); i < len(cov.s) && cov.s[i].lo < b; i++ {
			lo, hi := max(cov.s[i].lo, a), min(cov.s[i].hi, b)
			if lo >= hi {
				continue
			}
			if *budget <= 0 {
				return codes, nil, ErrTooManySpans
			}
			*budget--
			spans = append(spans, Span{lo * k.periodMs, hi * k.periodMs})
		}
		if len(spans) > 0 {
			out = append(out, ChannelSpans{Channel: k.code, RateHz: k.rate, Spans: spans})
		}
	}
	return codes, out, nil
}

package fdsndataselect

import (
	"net/http"
	"sort"
	"time"

	"shindo.dev/seismo/mseed"
	"shindo.dev/svc-dataapi/internal/fdsn"
)

// segment is a stretch of one channel's records without a gap, [start, end)
// in Unix ns.
type segment struct {
	start, end int64
}

// segmentSet is what a window's first reading found: per channel, the
// continuous segments minimumlength and longestonly keep.
type segmentSet map[string][]segment

// segments reads a window's record headers once and keeps, per channel,
// the continuous segments at least minLen long — with longestonly only the
// longest of them (the first of equals). Two records are continuous when
// the second starts within half a sample of the first's end, the tolerance
// libmseed merges traces with.
func (a *answer) segments(win window) (segmentSet, error) {
	open := map[string]*segment{}
	kept := segmentSet{}
	n := 0
	close := func(ch string, s segment) error {
		if time.Duration(s.end-s.start) < a.minLen {
			return nil
		}
		if a.longest {
			if cur := kept[ch]; len(cur) == 0 || s.end-s.start > cur[0].end-cur[0].start {
				kept[ch] = []segment{s}
			}
			return nil
		}
		if n++; n > maxSegments {
			return &fdsn.Error{Status: http.StatusRequestEntityTooLarge, Detail: "the window holds more continuous segments than minimumlength can sort: narrow the window"}
		}
		kept[ch] = append(kept[ch], s)
		return nil
	}
	err := a.exportRecords(win, func(_ []byte, hdr mseed.Header) error {
		start, end := hdr.Start.UnixNano(), hdr.End().UnixNano()
		s := open[hdr.Channel]
		if s != nil && abs(start-s.end) <= int64(hdr.SamplePeriod())/2 {
			s.end = end
			return nil
		}
		if s != nil {
			if err := close(hdr.Channel, *s); err != nil {
				return err
			}
		}
		open[hdr.Channel] = &segment{start, end}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for ch, s := range open {
		if err := close(ch, *s); err != nil {
			return nil, err
		}
	}
	return kept, nil
}

// keeps reports whether a record lies in a kept segment of its channel
// (a channel's segments are in time order and do not overlap).
func (set segmentSet) keeps(hdr mseed.Header) bool {
	start, end := hdr.Start.UnixNano(), hdr.End().UnixNano()
	segs := set[hdr.Channel]
	i := sort.Search(len(segs), func(i int) bool { return segs[i].end > start })
	return i < len(segs) && start >= segs[i].start && end <= segs[i].end
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

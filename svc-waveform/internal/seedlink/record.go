package seedlink

import (
	"fmt"
	"time"

	"shindo.dev/seismo/mseed"
	"shindo.dev/seismo/seedcode"
)

// RecordLen is the length of the miniSEED 2 records sent: SeedLink 3's
// fixed 512 bytes, used for protocol 4 too.
const RecordLen = 512

// Location is the location code of every channel, as in the archive.
const Location = "00"

// Stream is one channel of a station as SeedLink selects it.
type Stream struct {
	Location, Channel string
}

// sourceID is the stream's part of an FDSN source identifier after the
// station, LOC_B_S_SS, which SeedLink 4 selectors match.
func (s Stream) sourceID() string {
	c := s.Channel
	return s.Location + "_" + c[0:1] + "_" + c[1:2] + "_" + c[2:3]
}

// streams are a station's channels in the archive's order: the three axes
// of counts, then intensity, PGA and PGV.
var streams = func() (out [len(seedcode.Channels)]Stream) {
	for i, c := range seedcode.Channels {
		out[i] = Stream{Location, c.Code}
	}
	return out
}()

// Payload formats, as protocol 4's header names them.
const (
	mseed2 byte = '2'
	mseed3 byte = '3'
)

// record is one miniSEED record of an entry, with its sequence number.
type record struct {
	seq    uint64
	format byte // mseed2 or mseed3
	stream Stream
	start  time.Time
	end    time.Time // just after the last sample
	data   []byte
}

// records encodes the records of e whose streams keep accepts, in the
// given format.
//
// miniSEED 2 records are RecordLen bytes: one per axis (or intensity
// value) in the usual case, more when an axis does not fit one record.
// The record's own sequence field holds the low six decimal digits of its
// SeedLink number. miniSEED 3 records hold exactly what arrived: one per
// channel, of just the frames its samples need.
//
// from (0: none) cuts each channel's samples whose numbers are below it:
// for frames read back from the archive, whose records are cut anew, so
// that a client resuming there gets each channel from exactly where it
// was. A live frame is one record per channel at both cores, and is sent
// whole or not at all.
func records(key StationKey, e *entry, keep func(Stream) bool, from uint64, format byte) ([]record, error) {
	var out []record
	if e.Sensor {
		axes := [3][]int32{e.UD, e.NS, e.EW}
		k := e.FirstMs / sampleMs
		for a, x := range axes {
			s := streams[a]
			if !keep(s) {
				continue
			}
			done := 0
			if sl := slot(a); from > sl {
				// The first sample index whose number reaches from.
				done = int(min(max(int64((from-sl+slotsPerTick-1)/slotsPerTick)-k, 0), int64(len(x))))
			}
			for done < len(x) {
				startMs := e.FirstMs + int64(done)*sampleMs
				seq := seqAt(startMs, a)
				start := time.UnixMilli(startMs).UTC()
				h := mseed.Header{
					SeqNo: int(seq % 1_000_000), Network: key.Network, Station: key.Station,
					Location: s.Location, Channel: s.Channel, Start: start, SampleRate: 50, Encoding: mseed.Steim2,
				}
				var buf []byte
				var n int
				var err error
				if format == mseed3 {
					buf, err = mseed.AppendInts3(nil, h, x[done:])
					n = len(x) - done
				} else {
					buf = make([]byte, RecordLen)
					n, err = mseed.PackInts(buf, h, x[done:])
				}
				if err != nil {
					return out, err
				}
				if n == 0 {
					return out, fmt.Errorf("seedlink: %s at %v: a sample does not fit a record", key.ID(), start)
				}
				done += n
				out = append(out, record{seq: seq, format: format, stream: s, start: start, end: start.Add(time.Duration(n) * sampleMs * time.Millisecond), data: buf})
			}
		}
		return out, nil
	}
	for i, v := range e.Values {
		s := streams[3+i]
		if !keep(s) {
			continue
		}
		seq := seqAt(e.FirstMs-intensityMs, 3+i)
		if seq < from {
			continue
		}
		start := time.UnixMilli(e.FirstMs).UTC()
		h := mseed.Header{
			SeqNo: int(seq % 1_000_000), Network: key.Network, Station: key.Station,
			Location: s.Location, Channel: s.Channel, Start: start, SampleRate: 2,
		}
		var buf []byte
		var err error
		if format == mseed3 {
			buf, err = mseed.AppendFloat32s3(nil, h, []float32{v})
		} else {
			buf = make([]byte, RecordLen)
			_, err = mseed.PackFloat32s(buf, h, []float32{v})
		}
		if err != nil {
			return out, err
		}
		out = append(out, record{seq: seq, format: format, stream: s, start: start, end: start.Add(intensityMs * time.Millisecond), data: buf})
	}
	return out, nil
}

// span is the time an entry's samples cover.
func (e *entry) span() (start, end time.Time) {
	start = time.UnixMilli(e.FirstMs).UTC()
	if e.Sensor {
		return start, start.Add(time.Duration(len(e.UD)) * sampleMs * time.Millisecond)
	}
	return start, start.Add(intensityMs * time.Millisecond)
}

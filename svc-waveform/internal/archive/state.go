package archive

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"

	"shindo.dev/seismo/seedcode"
)

// The checkpoint file holds what recovery needs besides the WAL:
//
//	magic "SHWCKP01"
//	uvarint replay_from   first WAL segment to replay
//	uvarint rotated_at    first segment written after the checkpoint
//	uvarint stations, then per station: id, and per channel
//	        uvarint spans, then (lo - previous hi, hi - lo) as varints:
//	        the sample indexes that are in records
//	uint32  CRC-32C of everything before it
//
// It is written to a temporary file, synced and renamed over the old one.

var checkpointMagic = []byte("SHWCKP01")

const checkpointName = "checkpoint"

type checkpoint struct {
	replayFrom, rotatedAt uint64
	stored                map[string]*[numChannels]ivset
}

func encodeCheckpoint(replayFrom, rotatedAt uint64, stations []*station) []byte {
	b := append([]byte(nil), checkpointMagic...)
	b = binary.AppendUvarint(b, replayFrom)
	b = binary.AppendUvarint(b, rotatedAt)
	b = binary.AppendUvarint(b, uint64(len(stations)))
	for _, st := range stations {
		b = binary.AppendUvarint(b, uint64(len(st.id)))
		b = append(b, st.id...)
		for _, c := range st.ch {
			b = binary.AppendUvarint(b, uint64(len(c.stored.s)))
			var prev int64
			for _, s := range c.stored.s {
				b = binary.AppendVarint(b, s.lo-prev)
				b = binary.AppendVarint(b, s.hi-s.lo)
				prev = s.hi
			}
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeCheckpoint(b []byte) (*checkpoint, error) {
	bad := errors.New("corrupt checkpoint")
	if len(b) < len(checkpointMagic)+4 || !bytes.Equal(b[:len(checkpointMagic)], checkpointMagic) {
		return nil, bad
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, bad
	}
	r := itemReader{body[len(checkpointMagic):]}
	cp := &checkpoint{stored: map[string]*[numChannels]ivset{}}
	var err error
	if cp.replayFrom, err = r.uvarint(); err != nil {
		return nil, bad
	}
	if cp.rotatedAt, err = r.uvarint(); err != nil {
		return nil, bad
	}
	n, err := r.uvarint()
	if err != nil {
		return nil, bad
	}
	for range n {
		id, err := r.str()
		if err != nil {
			return nil, bad
		}
		var sets [numChannels]ivset
		for c := range sets {
			k, err := r.uvarint()
			if err != nil || k > uint64(len(r.b)) {
				return nil, bad
			}
			var prev int64
			for range k {
				d, err1 := r.varint()
				l, err2 := r.varint()
				if err1 != nil || err2 != nil || l <= 0 {
					return nil, bad
				}
				lo := prev + d
				sets[c].s = append(sets[c].s, span{lo, lo + l})
				prev = lo + l
			}
		}
		cp.stored[id] = &sets
	}
	return cp, nil
}

// mapEntry is one line of stations.jsonl: the SEED names a station was
// given when it was first seen, and its count size.
type mapEntry struct {
	ID      string `json:"id"`
	Network string `json:"net"`
	Station string `json:"sta"`
	// Location is absent from lines written before stations had their own
	// (Location then).
	Location *string `json:"loc,omitempty"`
	ScaleGal float32 `json:"scale_gal"`
}

const stationMapName = "stations.jsonl"

// loadStationMap reads stations.jsonl. A last line without its newline
// was torn by a crash before it was synced, so nothing acked depends on it:
// it is cut off.
func loadStationMap(path string) ([]mapEntry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(b, '\n'); i+1 != len(b) {
		if err := os.Truncate(path, int64(i+1)); err != nil {
			return nil, err
		}
		b = b[:i+1]
	}
	var out []mapEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		var e mapEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.ID == "" || !seedcode.IsCode(e.Network, 1, seedcode.MaxNetwork) || !seedcode.IsCode(e.Station, 1, seedcode.MaxStation) ||
			e.Location != nil && !seedcode.IsCode(*e.Location, 0, seedcode.MaxLocation) {
			return nil, fmt.Errorf("%s line %d: not a station entry", path, line)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

package mseed

import (
	"errors"
	"fmt"
	"io"
)

// Reader reads consecutive records from a byte stream, such as a miniSEED
// file or an export. Each record's length comes from its blockette 1000,
// which must lie in its first 128 bytes (as in every record written by
// common software).
type Reader struct {
	r   io.Reader
	buf []byte
	off int64
}

// NewReader returns a Reader of r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Offset is the byte offset of the next record in the stream.
func (rd *Reader) Offset() int64 { return rd.off }

// Next returns the next record's raw bytes, valid until the following call,
// and its parsed header. At the end of the stream it returns io.EOF; a
// stream that ends inside a record gives io.ErrUnexpectedEOF.
func (rd *Reader) Next() ([]byte, Header, error) {
	if cap(rd.buf) < MinRecordLen {
		rd.buf = make([]byte, MinRecordLen, 4096)
	}
	b := rd.buf[:MinRecordLen]
	if _, err := io.ReadFull(rd.r, b); err != nil {
		return nil, Header{}, err
	}
	h, err := ParseHeader(b)
	if err != nil {
		return nil, h, fmt.Errorf("record at byte %d: %w", rd.off, err)
	}
	if cap(rd.buf) < h.RecordLen {
		nb := make([]byte, h.RecordLen)
		copy(nb, b)
		rd.buf = nb
	}
	b = rd.buf[:h.RecordLen]
	if _, err := io.ReadFull(rd.r, b[MinRecordLen:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, h, fmt.Errorf("record at byte %d: %w", rd.off, err)
	}
	if h, err = ParseHeader(b); err != nil {
		return nil, h, fmt.Errorf("record at byte %d: %w", rd.off, err)
	}
	rd.off += int64(h.RecordLen)
	return b, h, nil
}

// Read returns the next record, decoded.
func (rd *Reader) Read() (*Record, error) {
	off := rd.off
	b, _, err := rd.Next()
	if err != nil {
		return nil, err
	}
	rec, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("record at byte %d: %w", off, err)
	}
	return rec, nil
}

// ReadAll decodes every record of r.
func ReadAll(r io.Reader) ([]*Record, error) {
	rd := NewReader(r)
	var out []*Record
	for {
		rec, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}

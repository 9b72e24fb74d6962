package mseed

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// packing is one of Steim-2's ways of filling a 32-bit data word: count
// differences of width bits, with the word's 2-bit nibble in the frame's
// first word and, for nibbles 10 and 11, a 2-bit dnib at the top of the
// word itself. shift is where the first difference's lowest bit sits; the
// next ones follow width bits lower.
type packing struct {
	count, width int
	nibble, dnib uint32
	shift        int
}

// packings from the densest to the widest; the encoder takes the first that
// holds the next differences.
var packings = [...]packing{
	{7, 4, 3, 2, 24},
	{6, 5, 3, 1, 25},
	{5, 6, 3, 0, 24},
	{4, 8, 1, 0, 24},
	{3, 10, 2, 3, 20},
	{2, 15, 2, 2, 15},
	{1, 30, 2, 1, 0},
}

// widthOf is the number of bits d needs in two's complement.
func widthOf(d int64) int {
	if d < 0 {
		d = ^d
	}
	return bits.Len64(uint64(d)) + 1
}

// EncodeSteim2 compresses the leading samples of x into dst, which it
// fills with whole 64-byte frames (len(dst)/64 of them; the rest of dst is
// zeroed), and returns how many samples it took. The first difference,
// which would link the record to the previous one, is written as 0: every
// record stands alone, as decoders start from X0 anyway. Encoding stops
// before a difference that needs more than 30 bits.
func EncodeSteim2(dst []byte, x []int32) int {
	frames := len(dst) / FrameLen
	clear(dst)
	if frames == 0 || len(x) == 0 {
		return 0
	}
	be := binary.BigEndian
	be.PutUint32(dst[4:], uint32(x[0])) // X0
	var (
		i     = 0 // next sample whose difference is to be packed
		w     [7]int
		ctrl  uint32
		frame = 0
		word  = 3
	)
	diff := func(j int) int64 {
		if j == 0 {
			return 0
		}
		return int64(x[j]) - int64(x[j-1])
	}
	for i < len(x) {
		// Widths of the next differences, stopping at one out of range.
		r := 0
		for r < 7 && i+r < len(x) {
			wd := widthOf(diff(i + r))
			if wd > 30 {
				break
			}
			w[r] = wd
			r++
		}
		if r == 0 {
			break
		}
		var p *packing
		for k := range packings {
			c := min(packings[k].count, r)
			fits := true
			for j := range c {
				if w[j] > packings[k].width {
					fits = false
					break
				}
			}
			// Fewer differences than the packing holds is only allowed at
			// the end of what can be encoded: the rest of the word is
			// padding the decoder never reads (it stops at the count).
			if fits && (c == packings[k].count || c == r) {
				p = &packings[k]
				break
			}
		}
		c := min(p.count, r)
		var v uint32
		mask := uint32(1)<<p.width - 1
		for j := range c {
			v |= (uint32(diff(i+j)) & mask) << (p.shift - j*p.width)
		}
		if p.nibble != 1 {
			v |= p.dnib << 30
		}
		be.PutUint32(dst[frame*FrameLen+4*word:], v)
		ctrl |= p.nibble << (30 - 2*word)
		i += c
		word++
		if word == 16 {
			be.PutUint32(dst[frame*FrameLen:], ctrl)
			ctrl, word = 0, 1
			frame++
			if frame == frames {
				break
			}
		}
	}
	if word > 1 && frame < frames {
		be.PutUint32(dst[frame*FrameLen:], ctrl)
	}
	be.PutUint32(dst[8:], uint32(x[i-1])) // Xn
	return i
}

// steimFrames checks the data section's size for n samples.
func steimFrames(data []byte, n int) (int, error) {
	frames := len(data) / FrameLen
	if n < 0 {
		return 0, fmt.Errorf("%w: %d samples", ErrData, n)
	}
	if n > 0 && frames == 0 {
		return 0, fmt.Errorf("%w: %d samples but no Steim frame", ErrData, n)
	}
	return frames, nil
}

// DecodeSteim1 decodes n samples of Steim-1 data (four 8-bit, two 16-bit
// or one 32-bit difference per word) in the given word order.
func DecodeSteim1(data []byte, n int, order binary.ByteOrder) ([]int32, error) {
	return decodeSteim(data, n, order, steim1Word)
}

// DecodeSteim2 decodes n samples of Steim-2 data in the given word order.
func DecodeSteim2(data []byte, n int, order binary.ByteOrder) ([]int32, error) {
	return decodeSteim(data, n, order, steim2Word)
}

// wordDecoder unpacks one data word with its nibble into diffs and
// returns how many it holds.
type wordDecoder func(nibble, v uint32, diffs *[7]int32) (int, error)

func steim1Word(nibble, v uint32, d *[7]int32) (int, error) {
	switch nibble {
	case 1:
		for j := range 4 {
			d[j] = int32(int8(v >> (24 - 8*j)))
		}
		return 4, nil
	case 2:
		d[0], d[1] = int32(int16(v>>16)), int32(int16(v))
		return 2, nil
	case 3:
		d[0] = int32(v)
		return 1, nil
	}
	return 0, nil
}

func steim2Word(nibble, v uint32, d *[7]int32) (int, error) {
	var p *packing
	switch nibble {
	case 0:
		return 0, nil
	case 1:
		p = &packings[3]
	default:
		dnib := v >> 30
		for k := range packings {
			if packings[k].nibble == nibble && packings[k].dnib == dnib {
				p = &packings[k]
			}
		}
		if p == nil {
			return 0, fmt.Errorf("%w: Steim-2 nibble %02b with dnib %02b", ErrData, nibble, dnib)
		}
	}
	for j := range p.count {
		u := v >> (p.shift - j*p.width) & (1<<p.width - 1)
		// Sign-extend from width bits.
		d[j] = int32(u<<(32-p.width)) >> (32 - p.width)
	}
	return p.count, nil
}

func decodeSteim(data []byte, n int, order binary.ByteOrder, word wordDecoder) ([]int32, error) {
	frames, err := steimFrames(data, n)
	if err != nil || n == 0 {
		return nil, err
	}
	out := make([]int32, 0, n)
	x0 := int32(order.Uint32(data[4:]))
	xn := int32(order.Uint32(data[8:]))
	var d [7]int32
	for f := 0; f < frames && len(out) < n; f++ {
		fr := data[f*FrameLen : (f+1)*FrameLen]
		ctrl := order.Uint32(fr)
		start := 1
		if f == 0 {
			start = 3
		}
		for w := start; w < 16 && len(out) < n; w++ {
			nibble := ctrl >> (30 - 2*w) & 3
			c, err := word(nibble, order.Uint32(fr[4*w:]), &d)
			if err != nil {
				return nil, err
			}
			for j := 0; j < c && len(out) < n; j++ {
				if len(out) == 0 {
					out = append(out, x0) // the first difference is ignored
				} else {
					out = append(out, out[len(out)-1]+d[j])
				}
			}
		}
	}
	if len(out) < n {
		return nil, fmt.Errorf("%w: frames hold %d of %d samples", ErrData, len(out), n)
	}
	if out[n-1] != xn {
		return nil, fmt.Errorf("%w: last sample %d, Xn %d", ErrIntegrity, out[n-1], xn)
	}
	return out, nil
}

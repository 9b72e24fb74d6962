package township

import (
	_ "embed"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
)

//go:embed townships.tsv
var townshipsTSV string

//go:embed boundaries.txt
var boundariesTXT string

// unit is the size of boundaries.txt's integer coordinates, in degrees.
const unit = 1e-4

// point is a position in units: x east (longitude), y north (latitude).
type point struct{ x, y float64 }

// box is a bounding box in units.
type box struct{ minX, minY, maxX, maxY float64 }

func (b *box) add(p point) {
	b.minX, b.minY = min(b.minX, p.x), min(b.minY, p.y)
	b.maxX, b.maxY = max(b.maxX, p.x), max(b.maxY, p.y)
}

func (b box) contains(p point) bool {
	return p.x >= b.minX && p.x <= b.maxX && p.y >= b.minY && p.y <= b.maxY
}

var empty = box{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}

// ring is a closed ring, its last point joined back to the first.
type ring struct {
	box
	pts []point
}

// shape is the boundary of one township: the rings it is inside an odd
// number of.
type shape struct {
	box
	town  int // index into data.towns
	rings []ring
	refs  [][]int // each ring's arcs, as boundaries.txt lists them
}

type data struct {
	towns  []Township // by code
	shapes []shape    // the townships that have a boundary, by code
	arcs   [][]point  // the arcs the rings are made of
}

// load parses the embedded files once. They are generated and checked by
// the tests, so a malformed line is a build defect and panics.
var load = sync.OnceValue(func() *data {
	d := &data{}
	if err := d.parseTowns(townshipsTSV); err != nil {
		panic("township: townships.tsv: " + err.Error())
	}
	if err := d.parseBoundaries(boundariesTXT); err != nil {
		panic("township: boundaries.txt: " + err.Error())
	}
	return d
})

func (d *data) parseTowns(text string) error {
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 7 {
			return fmt.Errorf("%d fields in %q", len(f), line)
		}
		code, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil {
			return fmt.Errorf("code in %q: %w", line, err)
		}
		lat, err := strconv.ParseFloat(f[5], 64)
		if err != nil {
			return fmt.Errorf("latitude in %q: %w", line, err)
		}
		lon, err := strconv.ParseFloat(f[6], 64)
		if err != nil {
			return fmt.Errorf("longitude in %q: %w", line, err)
		}
		if n := len(d.towns); n > 0 && d.towns[n-1].Code >= uint32(code) {
			return fmt.Errorf("code %d out of order", code)
		}
		d.towns = append(d.towns, Township{
			Code: uint32(code), County: f[1], Name: f[2], CountyEN: f[3], NameEN: f[4], Lat: lat, Lon: lon,
		})
	}
	return nil
}

func (d *data) parseBoundaries(text string) error {
	var arcs [][]point
	byCode := map[uint32]int{} // code → index into d.shapes
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" || line[0] == '#' {
			continue
		}
		kind, rest, _ := strings.Cut(line, " ")
		nums, err := ints(rest)
		if err != nil {
			return fmt.Errorf("%.40q: %w", line, err)
		}
		switch kind {
		case "a":
			if len(nums) < 2 || len(nums)%2 != 0 {
				return fmt.Errorf("arc %d: %d numbers", len(arcs), len(nums))
			}
			arc := make([]point, 0, len(nums)/2)
			x, y := 0, 0
			for i := 0; i < len(nums); i += 2 {
				x, y = x+nums[i], y+nums[i+1]
				arc = append(arc, point{float64(x), float64(y)})
			}
			arcs = append(arcs, arc)
		case "r":
			if len(nums) < 2 {
				return fmt.Errorf("ring without arcs: %.40q", line)
			}
			r, err := joinArcs(arcs, nums[1:])
			if err != nil {
				return fmt.Errorf("ring of %d: %w", nums[0], err)
			}
			code := uint32(nums[0])
			i, ok := byCode[code]
			if !ok {
				t, found := d.index(code)
				if !found {
					return fmt.Errorf("ring of unknown code %d", code)
				}
				i = len(d.shapes)
				byCode[code] = i
				d.shapes = append(d.shapes, shape{box: empty, town: t})
			}
			d.shapes[i].rings = append(d.shapes[i].rings, r)
			d.shapes[i].refs = append(d.shapes[i].refs, nums[1:])
			d.shapes[i].add(point{r.minX, r.minY})
			d.shapes[i].add(point{r.maxX, r.maxY})
		default:
			return fmt.Errorf("unknown line %.40q", line)
		}
	}
	d.arcs = arcs
	return nil
}

// joinArcs makes a ring of arcs joined end to start; ~i is arc i reversed.
func joinArcs(arcs [][]point, refs []int) (ring, error) {
	r := ring{box: empty}
	for _, ref := range refs {
		i := ref
		if ref < 0 {
			i = ^ref
		}
		if i >= len(arcs) {
			return ring{}, fmt.Errorf("no arc %d", i)
		}
		arc := arcs[i]
		for k := range arc {
			p := arc[k]
			if ref < 0 {
				p = arc[len(arc)-1-k]
			}
			if k == 0 && len(r.pts) > 0 {
				if r.pts[len(r.pts)-1] != p {
					return ring{}, fmt.Errorf("arc %d does not start where the one before ends", ref)
				}
				continue
			}
			r.pts = append(r.pts, p)
		}
	}
	if n := len(r.pts); n > 1 && r.pts[0] == r.pts[n-1] {
		r.pts = r.pts[:n-1]
	}
	if len(r.pts) < 3 {
		return ring{}, fmt.Errorf("%d points", len(r.pts))
	}
	for _, p := range r.pts {
		r.add(p)
	}
	return r, nil
}

// ints parses space-separated integers.
func ints(s string) ([]int, error) {
	out := make([]int, 0, strings.Count(s, " ")+1)
	for f := range strings.FieldsSeq(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// index is the position of code in d.towns.
func (d *data) index(code uint32) (int, bool) {
	for i, t := range d.towns {
		if t.Code == code {
			return i, true
		}
	}
	return 0, false
}

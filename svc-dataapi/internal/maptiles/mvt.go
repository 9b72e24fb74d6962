package maptiles

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Extent is a tile's size in its own coordinates (the Mapbox Vector Tile
// specification's default).
const Extent = 4096

// buffer is how far beyond its edges a tile draws, in tile units: enough
// that a border line's width is not cut at the tile's edge.
const buffer = 64

// Fields of vector_tile.proto (Mapbox Vector Tile specification 2.1).
const (
	tileLayers = 3

	layerName     = 1
	layerFeatures = 2
	layerKeys     = 3
	layerValues   = 4
	layerExtent   = 5
	layerVersion  = 15

	featureID   = 1
	featureTags = 2
	featureType = 3
	featureGeom = 4

	valueString = 1
	valueUint   = 5

	typePolygon = 3

	cmdMoveTo    = 1
	cmdLineTo    = 2
	cmdClosePath = 7
)

// tilePoint is a position in a tile's coordinates: x right, y down.
type tilePoint struct{ x, y int64 }

// project places [longitude, latitude] in tile (z, x, y) by Web Mercator,
// in units of the tile's Extent, unrounded.
func project(p [2]float64, z int, tx, ty int64) (float64, float64) {
	n := float64(int64(1)<<z) * Extent
	lat := math.Max(-85.05112878, math.Min(85.05112878, p[1])) * math.Pi / 180
	x := (p[0] + 180) / 360 * n
	y := (1 - math.Log(math.Tan(lat)+1/math.Cos(lat))/math.Pi) / 2 * n
	return x - float64(tx)*Extent, y - float64(ty)*Extent
}

// clip cuts a ring to the square [lo, hi]² (Sutherland–Hodgman, an edge
// at a time), keeping its winding.
func clip(ring [][2]float64, lo, hi float64) [][2]float64 {
	edges := []struct {
		inside func(p [2]float64) bool
		cross  func(a, b [2]float64) [2]float64
	}{
		{func(p [2]float64) bool { return p[0] >= lo }, func(a, b [2]float64) [2]float64 { return at(a, b, 0, lo) }},
		{func(p [2]float64) bool { return p[0] <= hi }, func(a, b [2]float64) [2]float64 { return at(a, b, 0, hi) }},
		{func(p [2]float64) bool { return p[1] >= lo }, func(a, b [2]float64) [2]float64 { return at(a, b, 1, lo) }},
		{func(p [2]float64) bool { return p[1] <= hi }, func(a, b [2]float64) [2]float64 { return at(a, b, 1, hi) }},
	}
	out := ring
	for _, e := range edges {
		in := out
		out = nil
		for i, cur := range in {
			prev := in[(i+len(in)-1)%len(in)]
			switch ci, pi := e.inside(cur), e.inside(prev); {
			case ci && pi:
				out = append(out, cur)
			case ci:
				out = append(out, e.cross(prev, cur), cur)
			case pi:
				out = append(out, e.cross(prev, cur))
			}
		}
		if len(out) == 0 {
			return nil
		}
	}
	return out
}

// at is where segment a–b crosses coordinate k = v.
func at(a, b [2]float64, k int, v float64) [2]float64 {
	t := (v - a[k]) / (b[k] - a[k])
	return [2]float64{a[0] + t*(b[0]-a[0]), a[1] + t*(b[1]-a[1])}
}

// quantize rounds a clipped ring to whole tile units, dropping points
// that repeat the one before. It returns nil for a ring that no longer
// encloses anything.
func quantize(ring [][2]float64) []tilePoint {
	out := make([]tilePoint, 0, len(ring))
	for _, p := range ring {
		q := tilePoint{int64(math.Round(p[0])), int64(math.Round(p[1]))}
		if n := len(out); n > 0 && out[n-1] == q {
			continue
		}
		out = append(out, q)
	}
	for len(out) > 1 && out[len(out)-1] == out[0] {
		out = out[:len(out)-1]
	}
	if len(out) < 3 || area2(out) == 0 {
		return nil
	}
	return out
}

// area2 is twice a ring's signed area in tile coordinates; positive is
// clockwise on screen (y down), the winding of a polygon's exterior ring
// in a vector tile.
func area2(r []tilePoint) int64 {
	var s int64
	for i, p := range r {
		q := r[(i+1)%len(r)]
		s += p.x*q.y - q.x*p.y
	}
	return s
}

// geometry appends a polygon's rings as drawing commands: each ring a
// MoveTo, a LineTo of the rest, a ClosePath, positions as deltas from the
// cursor, which carries over from one ring to the next.
func geometry(g []uint32, rings [][]tilePoint, cursor *tilePoint) []uint32 {
	for _, r := range rings {
		g = append(g, command(cmdMoveTo, 1))
		g = appendDelta(g, r[0], cursor)
		g = append(g, command(cmdLineTo, len(r)-1))
		for _, p := range r[1:] {
			g = appendDelta(g, p, cursor)
		}
		g = append(g, command(cmdClosePath, 1))
	}
	return g
}

func command(id, count int) uint32 { return uint32(id&7) | uint32(count)<<3 }

func appendDelta(g []uint32, p tilePoint, cursor *tilePoint) []uint32 {
	dx, dy := p.x-cursor.x, p.y-cursor.y
	*cursor = p
	return append(g, uint32(protowire.EncodeZigZag(dx)), uint32(protowire.EncodeZigZag(dy)))
}

// layer builds one layer of a tile.
type layer struct {
	name     string
	keys     []string
	values   [][]byte // encoded Value messages
	features [][]byte
	index    map[string]uint32 // encoded value → its index
}

func newLayer(name string, keys ...string) *layer {
	return &layer{name: name, keys: keys, index: map[string]uint32{}}
}

// value returns the index of an encoded Value, adding it the first time.
func (l *layer) value(v []byte) uint32 {
	if i, ok := l.index[string(v)]; ok {
		return i
	}
	i := uint32(len(l.values))
	l.values = append(l.values, v)
	l.index[string(v)] = i
	return i
}

func uintValue(n uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, valueUint, protowire.VarintType), n)
}

func stringValue(s string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, valueString, protowire.BytesType), s)
}

// addPolygon adds a feature of rings (each exterior ring followed by its
// holes, wound as area2 says) with one value per key.
func (l *layer) addPolygon(id uint64, rings [][]tilePoint, values ...[]byte) {
	var f []byte
	f = protowire.AppendTag(f, featureID, protowire.VarintType)
	f = protowire.AppendVarint(f, id)
	var tags []byte
	for k, v := range values {
		tags = protowire.AppendVarint(tags, uint64(k))
		tags = protowire.AppendVarint(tags, uint64(l.value(v)))
	}
	f = protowire.AppendTag(f, featureTags, protowire.BytesType)
	f = protowire.AppendBytes(f, tags)
	f = protowire.AppendTag(f, featureType, protowire.VarintType)
	f = protowire.AppendVarint(f, typePolygon)
	var geom []byte
	for _, c := range geometry(nil, rings, &tilePoint{}) {
		geom = protowire.AppendVarint(geom, uint64(c))
	}
	f = protowire.AppendTag(f, featureGeom, protowire.BytesType)
	f = protowire.AppendBytes(f, geom)
	l.features = append(l.features, f)
}

// appendTo appends the layer to a tile's bytes; a layer without features
// is left out.
func (l *layer) appendTo(tile []byte) []byte {
	if len(l.features) == 0 {
		return tile
	}
	var b []byte
	b = protowire.AppendTag(b, layerVersion, protowire.VarintType)
	b = protowire.AppendVarint(b, 2)
	b = protowire.AppendTag(b, layerName, protowire.BytesType)
	b = protowire.AppendString(b, l.name)
	for _, f := range l.features {
		b = protowire.AppendTag(b, layerFeatures, protowire.BytesType)
		b = protowire.AppendBytes(b, f)
	}
	for _, k := range l.keys {
		b = protowire.AppendTag(b, layerKeys, protowire.BytesType)
		b = protowire.AppendString(b, k)
	}
	for _, v := range l.values {
		b = protowire.AppendTag(b, layerValues, protowire.BytesType)
		b = protowire.AppendBytes(b, v)
	}
	b = protowire.AppendTag(b, layerExtent, protowire.VarintType)
	b = protowire.AppendVarint(b, Extent)
	tile = protowire.AppendTag(tile, tileLayers, protowire.BytesType)
	return protowire.AppendBytes(tile, b)
}

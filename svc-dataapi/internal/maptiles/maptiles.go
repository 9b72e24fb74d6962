// Package maptiles serves the base map TREM-Lite draws its data on: the
// boundaries of Taiwan's townships and counties as Mapbox Vector Tiles
// (specification 2.1), with the TileJSON that points to them.
//
// TREM-Lite's map takes its one vector source from
// /api/v1/map/tiles/tiles.json on its API host and starts reading data
// only once the map has loaded, which a source that fails keeps it from
// (src/js/index/map.js:21 and :97-108, data.js:120-131 of
// ExpTechTW/TREM-Lite at 9bbaccf). Its style draws the source layers
// "city" (counties: fill and outline) and "town" (fill), and colours
// towns by intensity with a match on their numeric property CODE, the
// postal code (utils.js:150-171); it also names "global" (the world's
// land) and "tsunami" (invisible lines), which we do not have: the
// TileJSON lists them, so that maplibre does not take them for an error,
// and no tile holds them. A county's polygon is its outline
// (township.CountyBoundaries), so its line layer draws county borders
// only, as over ExpTech's tiles.
//
// The boundaries are lib/township's (the Ministry of the Interior's,
// simplified to 1e-4 degree). Tiles are made on first request (15 ms
// for the largest) and kept: the 886 tiles with land up to zoom 12, the
// most the TileJSON offers (maplibre draws larger zooms from them), are
// 1.5 MB in all.
package maptiles

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"shindo.dev/lib/township"
	"shindo.dev/svc-dataapi/internal/httpapi"
)

// MaxZoom is the largest zoom served.
const MaxZoom = 12

// Base is where the routes are.
const Base = "/api/v1/map/tiles/"

// MediaType is a vector tile's media type.
const MediaType = "application/vnd.mapbox-vector-tile"

// maxCached bounds the bytes of tiles kept (all of Taiwan's to MaxZoom is
// 1.5 MB).
const maxCached = 16 << 20

// shape is a township's or a county's boundary, its rings sorted into
// polygons.
type shape struct {
	code                           uint32 // a township's; 0 for a county
	name                           string
	polygons                       []polygon
	minLon, minLat, maxLon, maxLat float64
}

func newShape(code uint32, name string, rings [][][2]float64) shape {
	s := shape{code: code, name: name, minLon: math.Inf(1), minLat: math.Inf(1), maxLon: math.Inf(-1), maxLat: math.Inf(-1)}
	for _, r := range rings {
		for _, p := range r {
			s.minLon, s.maxLon = min(s.minLon, p[0]), max(s.maxLon, p[0])
			s.minLat, s.maxLat = min(s.minLat, p[1]), max(s.maxLat, p[1])
		}
	}
	s.polygons = polygons(rings)
	return s
}

// polygon is an exterior ring and its holes, points [lon, lat].
type polygon struct {
	outer [][2]float64
	holes [][][2]float64
}

// Tiles makes and keeps tiles.
type Tiles struct {
	towns    []shape
	counties []shape

	bounds [4]float64 // west, south, east, north of every boundary

	mu     sync.Mutex
	cache  map[[3]int64][]byte
	cached int
}

// New prepares the boundaries.
func New() *Tiles {
	t := &Tiles{cache: map[[3]int64][]byte{}, bounds: [4]float64{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}}
	for _, b := range township.Boundaries() {
		tw, _ := township.Lookup(b.Code)
		s := newShape(b.Code, tw.Name, b.Rings)
		t.towns = append(t.towns, s)
		t.bounds = [4]float64{min(t.bounds[0], s.minLon), min(t.bounds[1], s.minLat), max(t.bounds[2], s.maxLon), max(t.bounds[3], s.maxLat)}
	}
	for _, c := range township.CountyBoundaries() {
		t.counties = append(t.counties, newShape(0, c.County, c.Rings))
	}
	return t
}

// polygons sorts a township's rings into exterior rings and holes: a ring
// inside an odd number of the others is a hole of the innermost exterior
// ring around it.
func polygons(rings [][][2]float64) []polygon {
	depth := make([]int, len(rings))
	parent := make([]int, len(rings))
	for i, r := range rings {
		parent[i] = -1
		for j, o := range rings {
			if i != j && inside(r[0], o) {
				depth[i]++
			}
		}
	}
	for i, r := range rings {
		if depth[i]%2 == 0 {
			continue
		}
		for j, o := range rings {
			if i != j && depth[j] == depth[i]-1 && inside(r[0], o) {
				parent[i] = j
			}
		}
	}
	var out []polygon
	at := map[int]int{}
	for i, r := range rings {
		if depth[i]%2 == 0 {
			at[i] = len(out)
			out = append(out, polygon{outer: r})
		}
	}
	for i, r := range rings {
		if p, ok := at[parent[i]]; ok && depth[i]%2 == 1 {
			out[p].holes = append(out[p].holes, r)
		}
	}
	return out
}

// inside tells whether p is inside ring r (even–odd).
func inside(p [2]float64, r [][2]float64) bool {
	in := false
	for k, j := 0, len(r)-1; k < len(r); j, k = k, k+1 {
		a, c := r[j], r[k]
		if (a[1] > p[1]) != (c[1] > p[1]) && p[0] < (c[0]-a[0])*(p[1]-a[1])/(c[1]-a[1])+a[0] {
			in = !in
		}
	}
	return in
}

// Tile returns tile (z, x, y) as a vector tile: empty (no layer) where
// no township reaches.
func (t *Tiles) Tile(z int, x, y int64) []byte {
	key := [3]int64{int64(z), x, y}
	t.mu.Lock()
	b, ok := t.cache[key]
	t.mu.Unlock()
	if ok {
		return b
	}
	b = t.render(z, x, y)
	if len(b) == 0 {
		// Most of the world: made as fast as looked up, and kept it
		// would let a client fill memory with the 22 million tiles of
		// nothing to zoom 12.
		return b
	}
	t.mu.Lock()
	if _, ok := t.cache[key]; !ok && t.cached+len(b) <= maxCached {
		t.cache[key] = b
		t.cached += len(b)
	}
	t.mu.Unlock()
	return b
}

// lonLat is the position of tile coordinates (px, py) of tile (z, x, y).
func lonLat(z int, x, y int64, px, py float64) (float64, float64) {
	n := float64(int64(1)<<z) * Extent
	gx, gy := float64(x)*Extent+px, float64(y)*Extent+py
	lon := gx/n*360 - 180
	lat := math.Atan(math.Sinh(math.Pi*(1-2*gy/n))) * 180 / math.Pi
	return lon, lat
}

func (t *Tiles) render(z int, x, y int64) []byte {
	west, north := lonLat(z, x, y, -buffer, -buffer)
	east, south := lonLat(z, x, y, Extent+buffer, Extent+buffer)
	town := newLayer("town", "CODE", "NAME")
	city := newLayer("city", "NAME")
	for i, s := range t.counties {
		if rings := s.inTile(z, x, y, west, south, east, north); rings != nil {
			city.addPolygon(uint64(i+1), rings, stringValue(s.name))
		}
	}
	for _, s := range t.towns {
		if rings := s.inTile(z, x, y, west, south, east, north); rings != nil {
			town.addPolygon(uint64(s.code), rings, uintValue(uint64(s.code)), stringValue(s.name))
		}
	}
	return town.appendTo(city.appendTo(nil))
}

// inTile is what of the shape tile (z, x, y) holds, whose edges and
// buffer lie at the longitudes and latitudes given: each exterior ring
// followed by its holes, in tile coordinates; nil for nothing.
func (s *shape) inTile(z int, x, y int64, west, south, east, north float64) [][]tilePoint {
	if s.maxLon < west || s.minLon > east || s.maxLat < south || s.minLat > north {
		return nil
	}
	var rings [][]tilePoint
	for _, p := range s.polygons {
		outer := tileRing(p.outer, z, x, y, 1)
		if outer == nil {
			continue
		}
		rings = append(rings, outer)
		for _, h := range p.holes {
			if hole := tileRing(h, z, x, y, -1); hole != nil {
				rings = append(rings, hole)
			}
		}
	}
	return rings
}

// tileRing is a ring in the coordinates of tile (z, x, y), cut to the
// tile and its buffer and wound as a vector tile's exterior ring (sign 1)
// or hole (−1); nil when nothing of it is left.
func tileRing(r [][2]float64, z int, x, y int64, sign int64) []tilePoint {
	pts := make([][2]float64, len(r))
	for i, p := range r {
		px, py := project(p, z, x, y)
		pts[i] = [2]float64{px, py}
	}
	q := quantize(clip(pts, -buffer, Extent+buffer))
	if q == nil {
		return nil
	}
	if area2(q)*sign < 0 {
		for i, j := 0, len(q)-1; i < j; i, j = i+1, j-1 {
			q[i], q[j] = q[j], q[i]
		}
	}
	return q
}

// ParseTile reads the z, x and y of a tile's path: decimal numbers, the
// last with the suffix ".pbf" or ".mvt", inside the world at zoom z ≤
// MaxZoom.
func ParseTile(zs, xs, file string) (z int, x, y int64, err error) {
	ys, ok := strings.CutSuffix(file, ".pbf")
	if !ok {
		if ys, ok = strings.CutSuffix(file, ".mvt"); !ok {
			return 0, 0, 0, fmt.Errorf("%q: a tile is {z}/{x}/{y}.pbf", file)
		}
	}
	num := func(s string) (int64, bool) {
		if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	zz, okz := num(zs)
	x, okx := num(xs)
	y, oky := num(ys)
	switch {
	case !okz || !okx || !oky:
		return 0, 0, 0, fmt.Errorf("%s/%s/%s: z, x and y are whole numbers", zs, xs, file)
	case zz > MaxZoom:
		return 0, 0, 0, fmt.Errorf("zoom %d: at most %d", zz, MaxZoom)
	case x >= 1<<zz || y >= 1<<zz:
		return 0, 0, 0, fmt.Errorf("tile %d/%d/%d is outside the world", zz, x, y)
	}
	return int(zz), x, y, nil
}

// Register adds the routes: the TileJSON and the tiles.
func (t *Tiles) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Base+"tiles.json", t.tileJSON)
	mux.HandleFunc("GET "+Base+"{z}/{x}/{file}", t.serveTile)
}

func (t *Tiles) serveTile(w http.ResponseWriter, r *http.Request) {
	z, x, y, err := ParseTile(r.PathValue("z"), r.PathValue("x"), r.PathValue("file"))
	if err != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintln(w, err)
		return
	}
	b := t.Tile(z, x, y)
	w.Header().Set("Content-Type", MediaType)
	// The boundaries change with a release, not by the hour.
	w.Header().Set("Cache-Control", "public, max-age=86400")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// tileJSON answers TileJSON 3.0.0. The tiles' address is the one the
// client used: its host and scheme, at the edge in front when it came
// through one (X-Forwarded-Host and -Proto, which the data API's guard
// applies from trusted proxies only: httpapi.Guard, httpapi.Scheme).
func (t *Tiles) tileJSON(w http.ResponseWriter, r *http.Request) {
	scheme := httpapi.Scheme(r)
	doc := map[string]any{
		"tilejson": "3.0.0",
		"name":     "shindo: Taiwan's counties and townships",
		"scheme":   "xyz",
		"tiles":    []string{scheme + "://" + r.Host + Base + "{z}/{x}/{y}.pbf"},
		"minzoom":  0,
		"maxzoom":  MaxZoom,
		"bounds":   t.bounds[:],
		"center":   []float64{121, 23.5, 7},
		"vector_layers": []map[string]any{
			{"id": "city", "fields": map[string]string{"NAME": "String"}, "minzoom": 0, "maxzoom": MaxZoom},
			{"id": "town", "fields": map[string]string{"CODE": "Number", "NAME": "String"}, "minzoom": 0, "maxzoom": MaxZoom},
			// Named by TREM-Lite's style and not held: maplibre reports
			// a style layer whose source layer the TileJSON does not list
			// as an error, and on any error TREM-Lite builds its map anew
			// every 3 s (map.js:97-108).
			{"id": "global", "fields": map[string]string{}, "description": "empty: the world's land is not served"},
			{"id": "tsunami", "fields": map[string]string{}, "description": "empty: tsunami coasts are not served"},
		},
		"attribution": "Township boundaries: Ministry of the Interior, Taiwan",
	}
	b, _ := json.Marshal(doc)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

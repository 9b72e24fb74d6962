package maptiles

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"shindo.dev/lib/township"
)

// decoded is a tile as a renderer reads it (Mapbox Vector Tile
// specification 2.1, section 4): layers of features, each feature's
// properties and its rings in tile coordinates.
type decoded map[string][]feature

type feature struct {
	props map[string]any
	rings [][]tilePoint
}

// decode reads a tile, failing the test on anything the specification
// does not allow.
func decode(t *testing.T, b []byte) decoded {
	t.Helper()
	out := decoded{}
	each(t, b, func(num protowire.Number, v []byte, _ uint64) {
		if num != tileLayers {
			t.Fatalf("tile field %d", num)
		}
		var name string
		var keys []string
		var values []any
		var feats [][]byte
		extent, version := uint64(0), uint64(0)
		each(t, v, func(num protowire.Number, v []byte, n uint64) {
			switch num {
			case layerName:
				name = string(v)
			case layerFeatures:
				feats = append(feats, v)
			case layerKeys:
				keys = append(keys, string(v))
			case layerValues:
				each(t, v, func(num protowire.Number, v []byte, n uint64) {
					switch num {
					case valueString:
						values = append(values, string(v))
					case valueUint:
						values = append(values, n)
					default:
						t.Fatalf("value field %d", num)
					}
				})
			case layerExtent:
				extent = n
			case layerVersion:
				version = n
			}
		})
		if version != 2 || extent != Extent || name == "" {
			t.Fatalf("layer %q: version %d, extent %d", name, version, extent)
		}
		for _, f := range feats {
			var tags, geom []uint64
			typ := uint64(0)
			each(t, f, func(num protowire.Number, v []byte, n uint64) {
				switch num {
				case featureTags:
					tags = packed(t, v)
				case featureGeom:
					geom = packed(t, v)
				case featureType:
					typ = n
				}
			})
			if typ != typePolygon || len(tags)%2 != 0 {
				t.Fatalf("layer %s: feature type %d, %d tags", name, typ, len(tags))
			}
			ft := feature{props: map[string]any{}, rings: rings(t, geom)}
			for i := 0; i < len(tags); i += 2 {
				ft.props[keys[tags[i]]] = values[tags[i+1]]
			}
			out[name] = append(out[name], ft)
		}
	})
	return out
}

func each(t *testing.T, b []byte, fn func(num protowire.Number, v []byte, n uint64)) {
	t.Helper()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatal("bad tag")
		}
		b = b[n:]
		switch typ {
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				t.Fatal("bad bytes")
			}
			fn(num, v, 0)
			b = b[n:]
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				t.Fatal("bad varint")
			}
			fn(num, nil, v)
			b = b[n:]
		default:
			t.Fatalf("wire type %d", typ)
		}
	}
}

func packed(t *testing.T, b []byte) []uint64 {
	var out []uint64
	for len(b) > 0 {
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			t.Fatal("bad packed varint")
		}
		out = append(out, v)
		b = b[n:]
	}
	return out
}

// rings runs a polygon's drawing commands (section 4.3): MoveTo 1,
// LineTo n, ClosePath, the cursor carried across rings.
func rings(t *testing.T, g []uint64) [][]tilePoint {
	var out [][]tilePoint
	var cur tilePoint
	for i := 0; i < len(g); {
		id, count := g[i]&7, int(g[i]>>3)
		i++
		switch id {
		case cmdMoveTo, cmdLineTo:
			if id == cmdMoveTo {
				if count != 1 {
					t.Fatalf("MoveTo %d", count)
				}
				out = append(out, nil)
			}
			if len(out) == 0 || i+2*count > len(g) {
				t.Fatal("LineTo before MoveTo, or short")
			}
			for range count {
				cur.x += protowire.DecodeZigZag(g[i])
				cur.y += protowire.DecodeZigZag(g[i+1])
				i += 2
				out[len(out)-1] = append(out[len(out)-1], cur)
			}
		case cmdClosePath:
			if count != 1 {
				t.Fatalf("ClosePath %d", count)
			}
		default:
			t.Fatalf("command %d", id)
		}
	}
	return out
}

// within tells whether p lies in a feature's polygons as a renderer
// reads them: an exterior ring (positive area) starts a polygon, the
// negative rings after it are its holes.
func within(p [2]float64, rs [][]tilePoint) bool {
	in := false
	for _, r := range rs {
		f := make([][2]float64, len(r))
		for i, q := range r {
			f[i] = [2]float64{float64(q.x), float64(q.y)}
		}
		if inside(p, f) {
			in = !in
		}
	}
	return in
}

// nearest is the distance from p to the nearest edge of rings.
func nearest(p [2]float64, rs [][]tilePoint) float64 {
	d := math.Inf(1)
	for _, r := range rs {
		for i, a := range r {
			b := r[(i+1)%len(r)]
			ax, ay, bx, by := float64(a.x), float64(a.y), float64(b.x), float64(b.y)
			l2 := (bx-ax)*(bx-ax) + (by-ay)*(by-ay)
			u := 0.0
			if l2 > 0 {
				u = max(0, min(1, ((p[0]-ax)*(bx-ax)+(p[1]-ay)*(by-ay))/l2))
			}
			d = min(d, math.Hypot(p[0]-ax-u*(bx-ax), p[1]-ay-u*(by-ay)))
		}
	}
	return d
}

func TestTilesPlaceEachTownship(t *testing.T) {
	tiles := New()
	for _, z := range []int{5, 8, 12} {
		for _, tw := range township.All() {
			if tw.Code == 290 || tw.Code == 817 || tw.Code == 819 {
				continue // no boundary (township.All)
			}
			n := float64(int64(1) << z)
			gx, gy := project([2]float64{tw.Lon, tw.Lat}, z, 0, 0)
			x, y := int64(gx/Extent), int64(gy/Extent)
			if x < 0 || y < 0 || float64(x) >= n || float64(y) >= n {
				t.Fatalf("%d outside the world", tw.Code)
			}
			px, py := project([2]float64{tw.Lon, tw.Lat}, z, x, y)
			tile := decode(t, tiles.Tile(z, x, y))
			found := false
			for _, f := range tile["town"] {
				if f.props["CODE"] != uint64(tw.Code) {
					continue
				}
				found = true
				for i, r := range f.rings {
					if a := area2(r); a == 0 || (i == 0 && a < 0) {
						t.Errorf("z%d %d: ring %d of area %d (the first must be exterior, positive)", z, tw.Code, i, a)
					}
				}
				if f.props["NAME"] != tw.Name {
					t.Errorf("%d: NAME %v", tw.Code, f.props["NAME"])
				}
				// A point within a tile unit or two of a border may fall
				// either side of it once the border is rounded to units.
				if !within([2]float64{px, py}, f.rings) && nearest([2]float64{px, py}, f.rings) > 2 {
					t.Errorf("z%d tile %d/%d: %d %s%s's point (%.0f, %.0f) is outside its feature", z, x, y, tw.Code, tw.County, tw.Name, px, py)
				}
			}
			if !found {
				t.Errorf("z%d tile %d/%d: no town with CODE %d", z, x, y, tw.Code)
			}
			counties := 0
			for _, f := range tile["city"] {
				if f.props["NAME"] == tw.County {
					counties++
					if !within([2]float64{px, py}, f.rings) && nearest([2]float64{px, py}, f.rings) > 2 {
						t.Errorf("z%d: %d is outside its county %s", z, tw.Code, tw.County)
					}
				}
			}
			if counties != 1 {
				t.Errorf("z%d tile %d/%d: county %s %d times", z, x, y, tw.County, counties)
			}
		}
	}
}

func TestTileFarFromTaiwanIsEmpty(t *testing.T) {
	tiles := New()
	if b := tiles.Tile(3, 0, 0); len(b) != 0 {
		t.Fatalf("%d bytes for the Arctic", len(b))
	}
	// Tiles of nothing are not kept: a client asking for the world's
	// must not fill memory.
	for x := range int64(1000) {
		tiles.Tile(12, x, 0)
	}
	tiles.Tile(7, 107, 55) // Hualien
	if n := len(tiles.cache); n != 1 {
		t.Fatalf("%d tiles kept, want Hualien's alone", n)
	}
}

func TestClipKeepsWhatIsInside(t *testing.T) {
	// A square larger than the tile, cut to it and its buffer.
	sq := [][2]float64{{-1000, -1000}, {5000, -1000}, {5000, 5000}, {-1000, 5000}}
	got := quantize(clip(sq, -buffer, Extent+buffer))
	want := int64(2) * (Extent + 2*buffer) * (Extent + 2*buffer)
	if a := area2(got); a != want {
		t.Fatalf("area %d, want %d (%v)", a, want, got)
	}
	if clip([][2]float64{{-900, -900}, {-800, -900}, {-800, -800}}, -buffer, Extent+buffer) != nil {
		t.Fatal("a ring outside the tile kept")
	}
}

func TestParseTile(t *testing.T) {
	for _, tc := range []struct {
		z, x, file string
		ok         bool
	}{
		{"7", "107", "56.pbf", true},
		{"0", "0", "0.mvt", true},
		{"12", "4095", "4095.pbf", true},
		{"13", "0", "0.pbf", false},
		{"2", "4", "0.pbf", false},
		{"2", "0", "4.pbf", false},
		{"-1", "0", "0.pbf", false},
		{"1", "+0", "0.pbf", false},
		{"1", "0", "0", false},
		{"1", "0", "0.png", false},
		{"1", "0", ".pbf", false},
		{"999999", "0", "0.pbf", false},
		{"1", "0x1", "0.pbf", false},
	} {
		_, _, _, err := ParseTile(tc.z, tc.x, tc.file)
		if (err == nil) != tc.ok {
			t.Errorf("%s/%s/%s: %v", tc.z, tc.x, tc.file, err)
		}
	}
}

func FuzzParseTile(f *testing.F) {
	f.Add("7", "107", "56.pbf")
	f.Add("12", "4095", "4095.mvt")
	f.Add("1", "-1", "0.pbf")
	f.Add("00012", "00001", "000.pbf")
	tiles := New()
	f.Fuzz(func(t *testing.T, zs, xs, file string) {
		z, x, y, err := ParseTile(zs, xs, file)
		if err != nil {
			return
		}
		if z < 0 || z > MaxZoom || x < 0 || y < 0 || x >= 1<<z || y >= 1<<z {
			t.Fatalf("%q/%q/%q → %d/%d/%d", zs, xs, file, z, x, y)
		}
		if z <= 6 {
			decode(t, tiles.Tile(z, x, y))
		}
	})
}

func TestRoutes(t *testing.T) {
	mux := http.NewServeMux()
	New().Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string, hdr ...string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, b := get(Base+"tiles.json", "X-Forwarded-Proto", "https")
	var doc struct {
		TileJSON     string    `json:"tilejson"`
		Tiles        []string  `json:"tiles"`
		MaxZoom      int       `json:"maxzoom"`
		Bounds       []float64 `json:"bounds"`
		VectorLayers []struct {
			ID string `json:"id"`
		} `json:"vector_layers"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &doc) != nil || doc.TileJSON != "3.0.0" || doc.MaxZoom != MaxZoom ||
		len(doc.Tiles) != 1 || len(doc.VectorLayers) != 4 || len(doc.Bounds) != 4 {
		t.Fatalf("tiles.json: %d %s", resp.StatusCode, b)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	if want := "https://" + host + Base + "{z}/{x}/{y}.pbf"; doc.Tiles[0] != want {
		t.Errorf("tiles %q, want %q", doc.Tiles[0], want)
	}
	if w, s, e, n := doc.Bounds[0], doc.Bounds[1], doc.Bounds[2], doc.Bounds[3]; w > 118.2 || e < 122 || s > 22 || n < 26.3 || w < 118 || n > 26.5 {
		t.Errorf("bounds %v: not Taiwan with Kinmen and Matsu", doc.Bounds)
	}
	// Hualien at zoom 7, through the template.
	path := strings.NewReplacer("{z}", "7", "{x}", "107", "{y}", "55").Replace(strings.TrimPrefix(doc.Tiles[0], "https://"+host))
	resp, b = get(path)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != MediaType || len(decode(t, b)["town"]) == 0 {
		t.Fatalf("%s: %d %s, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
	}
	for _, bad := range []string{"13/0/0.pbf", "7/107/55.png", "7/x/55.pbf", "7/107/55.pbf/more"} {
		if resp, b := get(Base + bad); resp.StatusCode != 404 {
			t.Errorf("%s: %d %s", bad, resp.StatusCode, b)
		}
	}
	if resp, _ := get(Base + "tiles.json"); resp.Header.Get("Content-Type") != "application/json" {
		t.Error("tiles.json content type")
	}
}

// BenchmarkTile: a tile made anew (the first request for it) and one
// kept, for the largest tile (zoom 6, all of Taiwan's main island) and
// one of Hualien at zoom 12.
func BenchmarkTile(b *testing.B) {
	tiles := New()
	for _, tc := range []struct {
		name string
		z    int
		x, y int64
	}{{"z6-taiwan", 6, 53, 27}, {"z12-hualien", 12, 3431, 1766}} {
		b.Run(tc.name+"/made", func(b *testing.B) {
			var n int
			for b.Loop() {
				n = len(tiles.render(tc.z, tc.x, tc.y))
			}
			b.ReportMetric(float64(n), "bytes")
		})
		b.Run(tc.name+"/kept", func(b *testing.B) {
			tiles.Tile(tc.z, tc.x, tc.y)
			for b.Loop() {
				tiles.Tile(tc.z, tc.x, tc.y)
			}
		})
	}
}

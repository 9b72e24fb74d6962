package township

import "math"

const earthRadiusKm = 6371.0088 // mean radius (IUGG)

// Locate returns the township a position lies in. Boundaries are simplified
// (99% of the Ministry of the Interior's boundary points within about 130 m
// of them, all within about 500 m), so within a few hundred metres of a
// border or the coast the answer may be the neighbour's, or none.
func Locate(lat, lon float64) (Township, bool) {
	p, ok := toPoint(lat, lon)
	if !ok {
		return Township{}, false
	}
	d := load()
	for i := range d.shapes {
		if s := &d.shapes[i]; s.contains(p) && s.inside(p) {
			return d.towns[s.town], true
		}
	}
	return Township{}, false
}

// Nearest returns the township whose land is nearest to a position and the
// great-circle distance to it in kilometres: 0 inside a township. Only
// townships with a boundary count (not 290, 817 and 819). The nearest
// boundary point is found in a flat projection around the position, exact
// enough within several hundred kilometres of Taiwan. A position that is
// not a coordinate (NaN, infinite, latitude beyond ±90°) gives the zero
// Township and +Inf.
func Nearest(lat, lon float64) (Township, float64) {
	lat, lon, ok := coordinate(lat, lon)
	if !ok {
		return Township{}, math.Inf(1)
	}
	if t, ok := Locate(lat, lon); ok {
		return t, 0
	}
	d := load()
	p := point{lon / unit, lat / unit}
	// Lengths in units of latitude, east–west shrunk by cos(lat).
	k := math.Cos(lat * math.Pi / 180)
	best, bestShape, at := math.Inf(1), -1, point{}
	nearer := func(i int) {
		s := &d.shapes[i]
		for j := range s.rings {
			r := &s.rings[j]
			if r.box.distance(p, k) >= best {
				continue
			}
			prev := r.pts[len(r.pts)-1]
			for _, cur := range r.pts {
				if dist, q := segment(p, prev, cur, k); dist < best {
					best, bestShape, at = dist, i, q
				}
				prev = cur
			}
		}
	}
	// The shape whose box is nearest first, so that its distance rules out
	// most of the others by their boxes.
	first, firstBox := 0, math.Inf(1)
	for i := range d.shapes {
		if b := d.shapes[i].box.distance(p, k); b < firstBox {
			first, firstBox = i, b
		}
	}
	nearer(first)
	for i := range d.shapes {
		if i != first && d.shapes[i].box.distance(p, k) < best {
			nearer(i)
		}
	}
	if bestShape < 0 {
		return Township{}, math.Inf(1)
	}
	return d.towns[d.shapes[bestShape].town], distanceKm(lat, lon, at.y*unit, at.x*unit)
}

// coordinate checks a position and takes its longitude within 180° of
// Taiwan's, which keeps the arithmetic on it finite.
func coordinate(lat, lon float64) (float64, float64, bool) {
	if math.IsNaN(lat) || math.IsNaN(lon) || math.IsInf(lon, 0) || lat < -90 || lat > 90 {
		return 0, 0, false
	}
	return lat, 121 + math.Remainder(lon-121, 360), true
}

// toPoint converts a coordinate to units, or reports that it is not one.
func toPoint(lat, lon float64) (point, bool) {
	lat, lon, ok := coordinate(lat, lon)
	return point{lon / unit, lat / unit}, ok
}

// inside applies the even-odd rule over the shape's rings.
func (s *shape) inside(p point) bool {
	in := false
	for i := range s.rings {
		r := &s.rings[i]
		if !r.contains(p) {
			continue
		}
		prev := r.pts[len(r.pts)-1]
		for _, cur := range r.pts {
			if (cur.y > p.y) != (prev.y > p.y) && p.x < (prev.x-cur.x)*(p.y-cur.y)/(prev.y-cur.y)+cur.x {
				in = !in
			}
			prev = cur
		}
	}
	return in
}

// distance is a lower bound of the distance from p to anything in the box,
// east–west lengths multiplied by k.
func (b box) distance(p point, k float64) float64 {
	dx := max(b.minX-p.x, 0, p.x-b.maxX) * k
	dy := max(b.minY-p.y, 0, p.y-b.maxY)
	return math.Hypot(dx, dy)
}

// segment returns the distance from p to the segment a–b, east–west
// lengths multiplied by k, and the nearest point of the segment.
func segment(p, a, b point, k float64) (float64, point) {
	dx, dy := (b.x-a.x)*k, b.y-a.y
	px, py := (p.x-a.x)*k, p.y-a.y
	t := 0.0
	if l := dx*dx + dy*dy; l > 0 {
		t = max(0, min(1, (px*dx+py*dy)/l))
	}
	return math.Hypot(px-t*dx, py-t*dy), point{a.x + t*(b.x-a.x), a.y + t*(b.y-a.y)}
}

// distanceKm is the great-circle distance between two positions
// (haversine).
func distanceKm(lat1, lon1, lat2, lon2 float64) float64 {
	φ1, φ2 := lat1*math.Pi/180, lat2*math.Pi/180
	dφ, dλ := φ2-φ1, (lon2-lon1)*math.Pi/180
	h := math.Sin(dφ/2)*math.Sin(dφ/2) + math.Cos(φ1)*math.Cos(φ2)*math.Sin(dλ/2)*math.Sin(dλ/2)
	return 2 * earthRadiusKm * math.Asin(math.Sqrt(min(1, h)))
}

// bearing is the initial bearing from the first position to the second,
// degrees clockwise from north in [0, 360).
func bearing(lat1, lon1, lat2, lon2 float64) float64 {
	φ1, φ2 := lat1*math.Pi/180, lat2*math.Pi/180
	dλ := (lon2 - lon1) * math.Pi / 180
	y := math.Sin(dλ) * math.Cos(φ2)
	x := math.Cos(φ1)*math.Sin(φ2) - math.Sin(φ1)*math.Cos(φ2)*math.Cos(dλ)
	b := math.Mod(math.Atan2(y, x)*180/math.Pi+360, 360)
	if b >= 360 { // -tiny + 360 rounds to 360
		b = 0
	}
	return b
}

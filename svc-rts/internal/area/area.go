// Package area maps stations to the areas existing clients draw ("boxes"):
// by default the cells of the fixed grid over Taiwan from SPEC §4, or any
// set of grid cells, rectangles and polygons read from a JSON file.
//
// The file format:
//
//	{
//	  "grid": {
//	    "lat_edges": [25.46, 25.10, …],   // north→south, strictly decreasing
//	    "lon_edges": [117.97, 118.46, …], // west→east, strictly increasing
//	    "cells": [[0, 6], [0, 7], …]      // [row, col]; cell i has box ID i
//	  },
//	  "areas": [
//	    {"id": 100, "rect": {"south": 24.0, "north": 24.5, "west": 121.0, "east": 121.5}},
//	    {"id": 101, "polygon": [[121.6, 23.9], [121.8, 23.9], [121.7, 24.2]]}
//	  ]
//	}
//
// Both parts are optional, but not both. Polygon vertices are [lon, lat]
// (GeoJSON order), implicitly closed. A point belongs to the first area
// containing it: grid cells first, then "areas" in file order. A grid cell
// or rectangle holds its northern and western edges: lat in (south, north],
// lon in [west, east).
package area

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// specLonEdges and specLatEdges are the grid of SPEC §4: longitude edges
// west→east (index 0–9), latitude edges north→south (index 0–10).
var (
	specLonEdges = []float64{117.97, 118.46, 118.95, 119.43, 119.92, 120.40, 120.89, 121.38, 121.86, 122.35}
	specLatEdges = []float64{25.46, 25.10, 24.74, 24.38, 24.02, 23.66, 23.30, 22.94, 22.58, 22.22, 21.86}
)

// specCells lists the grid cell (row, col) of each box ID, index = ID.
var specCells = [][2]int{
	{0, 6}, {0, 7}, {0, 8}, {1, 6}, {1, 7}, {1, 8}, {2, 5}, {2, 6}, {2, 7}, {2, 8},
	{3, 4}, {3, 5}, {3, 6}, {3, 7}, {4, 3}, {4, 4}, {4, 5}, {4, 6}, {4, 7}, {5, 2},
	{5, 3}, {5, 4}, {5, 5}, {5, 6}, {5, 7}, {6, 2}, {6, 3}, {6, 4}, {6, 5}, {6, 6},
	{6, 7}, {7, 4}, {7, 5}, {7, 6}, {7, 7}, {8, 4}, {8, 5}, {8, 6}, {9, 5}, {9, 6},
	{9, 7}, {2, 0}, {2, 1},
}

// Limits on a file, so a bad one fails at start rather than slowing ticks.
const (
	maxFileBytes = 16 << 20
	maxAreas     = 100_000
	maxVertices  = 10_000
	maxEdges     = 1_000
)

// ErrInvalid wraps every problem found in an areas file.
var ErrInvalid = errors.New("invalid areas")

// Set is an immutable set of areas. The zero value has none.
type Set struct {
	latEdges, lonEdges []float64
	byCell             map[[2]int]uint32
	shapes             []shape
}

type shape struct {
	id                       uint32
	south, north, west, east float64      // bounding box
	poly                     [][2]float64 // [lon, lat]; nil for a rectangle
}

// Default returns the grid of SPEC §4 (box IDs 0–42).
func Default() *Set {
	s, err := build(file{Grid: &gridSpec{LatEdges: specLatEdges, LonEdges: specLonEdges, Cells: specCells}})
	if err != nil {
		panic(err) // the built-in grid is valid; TestDefault checks it
	}
	return s
}

// Load reads an areas file.
func Load(path string) (*Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open areas: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read areas: %w", err)
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("%w: %s larger than %d bytes", ErrInvalid, path, maxFileBytes)
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

type file struct {
	Grid  *gridSpec  `json:"grid"`
	Areas []areaSpec `json:"areas"`
}

type gridSpec struct {
	LatEdges []float64 `json:"lat_edges"`
	LonEdges []float64 `json:"lon_edges"`
	Cells    [][2]int  `json:"cells"`
}

type areaSpec struct {
	ID      *uint32      `json:"id"`
	Rect    *rectSpec    `json:"rect"`
	Polygon [][2]float64 `json:"polygon"`
}

type rectSpec struct {
	South float64 `json:"south"`
	North float64 `json:"north"`
	West  float64 `json:"west"`
	East  float64 `json:"east"`
}

// Parse reads the JSON form described in the package documentation.
// Unknown fields are errors, so a misspelt key does not silently drop areas.
func Parse(b []byte) (*Set, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrInvalid)
	}
	return build(f)
}

func build(f file) (*Set, error) {
	if f.Grid == nil && len(f.Areas) == 0 {
		return nil, fmt.Errorf("%w: neither grid nor areas", ErrInvalid)
	}
	s := &Set{}
	ids := map[uint32]bool{}
	if g := f.Grid; g != nil {
		if err := checkEdges(g.LatEdges, -90, 90, -1, "lat_edges"); err != nil {
			return nil, err
		}
		if err := checkEdges(g.LonEdges, -180, 180, 1, "lon_edges"); err != nil {
			return nil, err
		}
		if len(g.Cells) == 0 || len(g.Cells) > maxAreas {
			return nil, fmt.Errorf("%w: grid needs 1 to %d cells", ErrInvalid, maxAreas)
		}
		s.latEdges, s.lonEdges = g.LatEdges, g.LonEdges
		s.byCell = make(map[[2]int]uint32, len(g.Cells))
		for i, c := range g.Cells {
			if c[0] < 0 || c[0] >= len(g.LatEdges)-1 || c[1] < 0 || c[1] >= len(g.LonEdges)-1 {
				return nil, fmt.Errorf("%w: cell %d %v outside the grid", ErrInvalid, i, c)
			}
			if _, dup := s.byCell[c]; dup {
				return nil, fmt.Errorf("%w: cell %v listed twice", ErrInvalid, c)
			}
			s.byCell[c] = uint32(i)
			ids[uint32(i)] = true
		}
	}
	if len(f.Areas)+len(s.byCell) > maxAreas {
		return nil, fmt.Errorf("%w: more than %d areas", ErrInvalid, maxAreas)
	}
	for i, a := range f.Areas {
		sh, err := buildShape(a)
		if err != nil {
			return nil, fmt.Errorf("%w: area %d: %v", ErrInvalid, i, err)
		}
		if ids[sh.id] {
			return nil, fmt.Errorf("%w: area %d: id %d used twice", ErrInvalid, i, sh.id)
		}
		ids[sh.id] = true
		s.shapes = append(s.shapes, sh)
	}
	return s, nil
}

func checkEdges(edges []float64, lo, hi float64, dir float64, name string) error {
	if len(edges) < 2 || len(edges) > maxEdges {
		return fmt.Errorf("%w: %s needs 2 to %d values", ErrInvalid, name, maxEdges)
	}
	for i, v := range edges {
		if !(v >= lo && v <= hi) {
			return fmt.Errorf("%w: %s[%d] = %v out of range", ErrInvalid, name, i, v)
		}
		if i > 0 && (v-edges[i-1])*dir <= 0 {
			return fmt.Errorf("%w: %s not strictly monotonic at %d", ErrInvalid, name, i)
		}
	}
	return nil
}

func buildShape(a areaSpec) (shape, error) {
	if a.ID == nil {
		return shape{}, errors.New("no id")
	}
	sh := shape{id: *a.ID}
	switch {
	case a.Rect != nil && a.Polygon != nil:
		return shape{}, errors.New("both rect and polygon")
	case a.Rect != nil:
		r := a.Rect
		if !validLat(r.South) || !validLat(r.North) || !validLon(r.West) || !validLon(r.East) || r.South >= r.North || r.West >= r.East {
			return shape{}, fmt.Errorf("bad rect %+v", *r)
		}
		sh.south, sh.north, sh.west, sh.east = r.South, r.North, r.West, r.East
	case a.Polygon != nil:
		if len(a.Polygon) < 3 || len(a.Polygon) > maxVertices {
			return shape{}, fmt.Errorf("polygon needs 3 to %d vertices", maxVertices)
		}
		sh.south, sh.north, sh.west, sh.east = math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
		for _, v := range a.Polygon {
			if !validLon(v[0]) || !validLat(v[1]) {
				return shape{}, fmt.Errorf("bad vertex %v (want [lon, lat])", v)
			}
			sh.west, sh.east = min(sh.west, v[0]), max(sh.east, v[0])
			sh.south, sh.north = min(sh.south, v[1]), max(sh.north, v[1])
		}
		sh.poly = a.Polygon
	default:
		return shape{}, errors.New("neither rect nor polygon")
	}
	return sh, nil
}

func validLat(v float64) bool { return v >= -90 && v <= 90 }
func validLon(v float64) bool { return v >= -180 && v <= 180 }

// Box returns the ID of the area containing (lat, lon), or false when the
// point lies outside every area.
func (s *Set) Box(lat, lon float64) (uint32, bool) {
	if s.byCell != nil {
		if row, ok := edgeIndex(s.latEdges, lat, true); ok {
			if col, ok := edgeIndex(s.lonEdges, lon, false); ok {
				if id, ok := s.byCell[[2]int{row, col}]; ok {
					return id, true
				}
			}
		}
	}
	for i := range s.shapes {
		if s.shapes[i].contains(lat, lon) {
			return s.shapes[i].id, true
		}
	}
	return 0, false
}

// edgeIndex finds the band of edges holding v: latitude bands (descending
// edges) hold their upper edge, longitude bands (ascending) their lower.
func edgeIndex(edges []float64, v float64, descending bool) (int, bool) {
	for i := 0; i+1 < len(edges); i++ {
		if descending && v <= edges[i] && v > edges[i+1] || !descending && v >= edges[i] && v < edges[i+1] {
			return i, true
		}
	}
	return 0, false
}

func (sh *shape) contains(lat, lon float64) bool {
	if sh.poly == nil {
		return lat > sh.south && lat <= sh.north && lon >= sh.west && lon < sh.east
	}
	if lat < sh.south || lat > sh.north || lon < sh.west || lon > sh.east {
		return false
	}
	in := false
	p := sh.poly
	for i, j := 0, len(p)-1; i < len(p); j, i = i, i+1 {
		xi, yi, xj, yj := p[i][0], p[i][1], p[j][0], p[j][1]
		if (yi > lat) != (yj > lat) && lon < (xj-xi)*(lat-yi)/(yj-yi)+xi {
			in = !in
		}
	}
	return in
}

// Len is the number of areas.
func (s *Set) Len() int { return len(s.byCell) + len(s.shapes) }

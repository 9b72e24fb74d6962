package area

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestDefault(t *testing.T) {
	t.Parallel()
	s := Default()
	tests := []struct {
		name     string
		lat, lon float64
		want     uint32
		ok       bool
	}{
		{"Taipei", 25.03, 121.52, 4, true},     // row 1, col 7
		{"Hualien", 23.99, 121.61, 18, true},   // row 4, col 7
		{"Kaohsiung", 22.63, 120.31, 31, true}, // row 7, col 4
		{"Kinmen", 24.43, 118.32, 41, true},    // row 2, col 0
		{"Taitung", 22.76, 121.14, 33, true},   // row 7, col 6
		{"north edge of row 4 belongs to it", 24.02, 121.61, 18, true},
		{"west edge of col 7 belongs to it", 23.99, 121.38, 18, true},
		{"open sea east", 23.5, 123.0, 0, false},
		{"Tokyo", 35.68, 139.69, 0, false},
		{"cell without box", 25.3, 118.0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := s.Box(tt.lat, tt.lon)
			if ok != tt.ok || (ok && got != tt.want) {
				t.Fatalf("Box(%v, %v) = %d, %v; want %d, %v", tt.lat, tt.lon, got, ok, tt.want, tt.ok)
			}
		})
	}
	if s.Len() != 43 {
		t.Fatalf("%d boxes, want 43", s.Len())
	}
}

// TestEveryBoxRoundTrips: the centre of every SPEC cell maps to its ID.
func TestEveryBoxRoundTrips(t *testing.T) {
	t.Parallel()
	s := Default()
	for id, c := range specCells {
		lat := (specLatEdges[c[0]] + specLatEdges[c[0]+1]) / 2
		lon := (specLonEdges[c[1]] + specLonEdges[c[1]+1]) / 2
		if got, ok := s.Box(lat, lon); !ok || got != uint32(id) {
			t.Fatalf("centre of box %d maps to %d, %v", id, got, ok)
		}
	}
}

// TestSpecFileMatchesDefault: testdata/spec-grid.json, the SPEC grid in the
// file format, behaves exactly like the built-in default.
func TestSpecFileMatchesDefault(t *testing.T) {
	t.Parallel()
	s, err := Load(filepath.Join("testdata", "spec-grid.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	for lat := 21.8; lat <= 25.5; lat += 0.013 {
		for lon := 117.9; lon <= 122.4; lon += 0.017 {
			a, aok := s.Box(lat, lon)
			b, bok := d.Box(lat, lon)
			if a != b || aok != bok {
				t.Fatalf("(%v, %v): file %d %v, default %d %v", lat, lon, a, aok, b, bok)
			}
		}
	}
}

func TestCustomAreas(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(`{
	  "grid": {"lat_edges": [25, 24, 23], "lon_edges": [120, 121, 122], "cells": [[0, 0], [1, 1]]},
	  "areas": [
	    {"id": 7, "rect": {"south": 23.5, "north": 24.5, "west": 120.5, "east": 121.5}},
	    {"id": 8, "polygon": [[121, 24], [122, 24], [121.5, 25]]}
	  ]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		lat, lon float64
		want     uint32
		ok       bool
	}{
		{24.5, 120.5, 0, true},  // grid cell 0 wins over the rectangle
		{23.5, 121.5, 1, true},  // grid cell 1
		{24.2, 121.2, 7, true},  // the rectangle (grid cell [0,1] is not listed)
		{24.7, 121.5, 8, true},  // inside the triangle
		{24.9, 121.1, 0, false}, // outside the triangle, in its bounding box
		{26, 121, 0, false},
	} {
		if got, ok := s.Box(tc.lat, tc.lon); ok != tc.ok || got != tc.want {
			t.Errorf("Box(%v, %v) = %d, %v; want %d, %v", tc.lat, tc.lon, got, ok, tc.want, tc.ok)
		}
	}
	if s.Len() != 4 {
		t.Errorf("Len %d", s.Len())
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	for name, doc := range map[string]string{
		"empty":            `{}`,
		"not json":         `grid`,
		"unknown field":    `{"areas":[{"id":1,"rect":{"south":1,"north":2,"west":1,"east":2}}],"boxes":[]}`,
		"trailing data":    `{"areas":[{"id":1,"rect":{"south":1,"north":2,"west":1,"east":2}}]} {}`,
		"lat not desc":     `{"grid":{"lat_edges":[1,2],"lon_edges":[1,2],"cells":[[0,0]]}}`,
		"lon not asc":      `{"grid":{"lat_edges":[2,1],"lon_edges":[2,1],"cells":[[0,0]]}}`,
		"lat out of range": `{"grid":{"lat_edges":[95,1],"lon_edges":[1,2],"cells":[[0,0]]}}`,
		"cell outside":     `{"grid":{"lat_edges":[2,1],"lon_edges":[1,2],"cells":[[1,0]]}}`,
		"cell twice":       `{"grid":{"lat_edges":[2,1],"lon_edges":[1,2],"cells":[[0,0],[0,0]]}}`,
		"no cells":         `{"grid":{"lat_edges":[2,1],"lon_edges":[1,2],"cells":[]}}`,
		"no id":            `{"areas":[{"rect":{"south":1,"north":2,"west":1,"east":2}}]}`,
		"id clash":         `{"grid":{"lat_edges":[2,1],"lon_edges":[1,2],"cells":[[0,0]]},"areas":[{"id":0,"rect":{"south":1,"north":2,"west":3,"east":4}}]}`,
		"empty rect":       `{"areas":[{"id":1,"rect":{"south":2,"north":2,"west":1,"east":2}}]}`,
		"rect and polygon": `{"areas":[{"id":1,"rect":{"south":1,"north":2,"west":1,"east":2},"polygon":[[1,1],[2,1],[1,2]]}]}`,
		"neither":          `{"areas":[{"id":1}]}`,
		"two vertices":     `{"areas":[{"id":1,"polygon":[[1,1],[2,1]]}]}`,
		"vertex range":     `{"areas":[{"id":1,"polygon":[[1,1],[2,100],[1,2]]}]}`,
	} {
		if _, err := Parse([]byte(doc)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("missing file accepted")
	}
}

// FuzzParse: no input crashes the parser, and an accepted set answers
// lookups.
func FuzzParse(f *testing.F) {
	spec, err := os.ReadFile(filepath.Join("testdata", "spec-grid.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(spec)
	f.Add([]byte(`{"areas":[{"id":8,"polygon":[[121,24],[122,24],[121.5,25]]}]}`))
	f.Add([]byte(`{"grid":{"lat_edges":[2,1],"lon_edges":[1,2],"cells":[[0,0]]},"areas":[{"id":4,"rect":{"south":1,"north":2,"west":3,"east":4}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if s.Len() == 0 {
			t.Fatal("accepted an empty set")
		}
		s.Box(24, 121)
	})
}

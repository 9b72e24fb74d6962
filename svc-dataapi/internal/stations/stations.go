// Package stations serves station metadata through DataService from the
// station registry (never the keys).
package stations

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	datav1 "shindo.dev/gen/shindo/data/v1"
	"shindo.dev/lib/registry"
)

// Source returns the current registry.
type Source func() *registry.Set

// Server implements the station RPCs of datav1.DataServiceServer.
type Server struct {
	datav1.UnimplementedDataServiceServer
	source Source
}

// New returns a server reading from source.
func New(source Source) *Server { return &Server{source: source} }

// ListStations lists stations, optionally of one network.
func (s *Server) ListStations(_ context.Context, req *datav1.ListStationsRequest) (*datav1.ListStationsResponse, error) {
	if len(req.GetNet()) > 32 {
		return nil, status.Error(codes.InvalidArgument, "net: at most 32 characters")
	}
	var out []*datav1.Station
	for _, st := range s.source().All() {
		if req.GetNet() != "" && st.Net != req.GetNet() {
			continue
		}
		out = append(out, toProto(st))
	}
	return &datav1.ListStationsResponse{Stations: out}, nil
}

// GetStation returns one station.
func (s *Server) GetStation(_ context.Context, req *datav1.GetStationRequest) (*datav1.GetStationResponse, error) {
	if req.GetId() == "" || len(req.GetId()) > 64 {
		return nil, status.Error(codes.InvalidArgument, "id: 1 to 64 characters")
	}
	st, ok := s.source().Lookup(req.GetId())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "station %q not found", req.GetId())
	}
	return &datav1.GetStationResponse{Station: toProto(st)}, nil
}

func toProto(st *registry.Station) *datav1.Station {
	return &datav1.Station{
		Id: st.ID, Name: st.Name, Net: st.Net, Lat: st.Lat, Lon: st.Lon, Code: st.Code, Active: st.InService(),
	}
}

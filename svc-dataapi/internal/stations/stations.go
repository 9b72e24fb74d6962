// Package stations serves station metadata through DataService — reads from
// the cached registry (never the keys) — and, to administrators (an admin
// token or an admin key), provisions stations, rotates their keys and
// records resets of their seq counters in the metadata database.
package stations

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	datav1 "shindo.dev/gen/shindo/data/v1"
	"shindo.dev/lib/metadb"
	"shindo.dev/lib/registry"
	"shindo.dev/seismo/seedcode"
	"shindo.dev/svc-dataapi/internal/auth"
	"shindo.dev/svc-dataapi/internal/storeerr"
)

// Source returns the current registry.
type Source func() *registry.Set

// Admin is what provisioning needs from the metadata database
// (metadb.Store).
type Admin interface {
	CreateStation(ctx context.Context, ns metadb.NewStation) (*registry.Station, error)
	UpdateStation(ctx context.Context, id string, u metadb.Update) (*registry.Station, error)
	RetireStation(ctx context.Context, id string) error
	RotateKey(ctx context.Context, id string, overlap time.Duration) (keyID uint32, key []byte, err error)
	GetStation(ctx context.Context, id string) (*registry.Station, error)
	ResetStationSeq(ctx context.Context, id string, at time.Time) (*registry.Station, error)
}

// maxOverlap bounds a key rotation's overlap.
const maxOverlap = 30 * 24 * time.Hour

// Authorizer checks that the caller of a call holds a role, returning a
// gRPC status error if not (auth.Authenticator).
type Authorizer interface {
	Require(ctx context.Context, role string) (auth.Principal, error)
}

// Server implements datav1.DataServiceServer's station RPCs; the others
// answer Unimplemented.
type Server struct {
	datav1.UnimplementedDataServiceServer
	source Source
	admin  Admin
	authz  Authorizer
	log    *slog.Logger
}

// New returns a server reading from source. admin may be nil (a file
// registry): administrative calls then fail with FailedPrecondition.
// authz admits administrators.
func New(source Source, admin Admin, authz Authorizer, log *slog.Logger) *Server {
	return &Server{source: source, admin: admin, authz: authz, log: log}
}

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
		out = append(out, Proto(st))
	}
	return &datav1.ListStationsResponse{Stations: out}, nil
}

// GetStation returns one station.
func (s *Server) GetStation(_ context.Context, req *datav1.GetStationRequest) (*datav1.GetStationResponse, error) {
	if err := checkID("id", req.GetId()); err != nil {
		return nil, err
	}
	st, ok := s.source().Lookup(req.GetId())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "station %q not found", req.GetId())
	}
	return &datav1.GetStationResponse{Station: Proto(st)}, nil
}

// CreateStation provisions a station.
func (s *Server) CreateStation(ctx context.Context, req *datav1.CreateStationRequest) (*datav1.CreateStationResponse, error) {
	if _, err := s.authorize(ctx); err != nil {
		return nil, err
	}
	if err := checkID("id", req.GetId()); err != nil {
		return nil, err
	}
	if err := checkPlace(req.GetName(), req.GetNet(), req.GetLat(), req.GetLon()); err != nil {
		return nil, err
	}
	seed := seedcode.Codes{Network: req.GetNetworkCode(), Station: req.GetStationCode(), Location: req.GetLocationCode()}
	if !seed.IsZero() {
		if seed.Network == "" || seed.Station == "" {
			return nil, status.Error(codes.InvalidArgument, "network_code and station_code: both, or neither to have them chosen")
		}
		if err := seed.Check(); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	var key []byte
	if req.GetKeyHex() != "" {
		k, err := hex.DecodeString(req.GetKeyHex())
		if err != nil || len(k) < 16 || len(k) > 64 {
			return nil, status.Error(codes.InvalidArgument, "key_hex: 16 to 64 bytes of hex, or empty to generate one")
		}
		key = k
	}
	st, err := s.admin.CreateStation(ctx, metadb.NewStation{
		ID: req.GetId(), Name: req.GetName(), Net: req.GetNet(), Lat: req.GetLat(), Lon: req.GetLon(), Code: req.GetCode(), Key: key,
		SEED: seed, Elevation: req.GetElevationM(), ScaleGal: req.GetScaleGal(),
	})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &datav1.CreateStationResponse{Station: Proto(st), Key: &datav1.StationKey{KeyId: st.KeyID, KeyHex: st.KeyHex}}, nil
}

// UpdateStation replaces a station's metadata.
func (s *Server) UpdateStation(ctx context.Context, req *datav1.UpdateStationRequest) (*datav1.UpdateStationResponse, error) {
	if _, err := s.authorize(ctx); err != nil {
		return nil, err
	}
	if err := checkID("id", req.GetId()); err != nil {
		return nil, err
	}
	if err := checkPlace(req.GetName(), req.GetNet(), req.GetLat(), req.GetLon()); err != nil {
		return nil, err
	}
	st, err := s.admin.UpdateStation(ctx, req.GetId(), metadb.Update{
		Name: req.GetName(), Net: req.GetNet(), Lat: req.GetLat(), Lon: req.GetLon(), Code: req.GetCode(),
		Elevation: req.ElevationM, ScaleGal: req.ScaleGal, // nil: unchanged
	})
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &datav1.UpdateStationResponse{Station: Proto(st)}, nil
}

// RetireStation takes a station out of service.
func (s *Server) RetireStation(ctx context.Context, req *datav1.RetireStationRequest) (*datav1.RetireStationResponse, error) {
	if _, err := s.authorize(ctx); err != nil {
		return nil, err
	}
	if err := checkID("id", req.GetId()); err != nil {
		return nil, err
	}
	if err := s.admin.RetireStation(ctx, req.GetId()); err != nil {
		return nil, s.fail(ctx, err)
	}
	st, err := s.admin.GetStation(ctx, req.GetId())
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &datav1.RetireStationResponse{Station: Proto(st)}, nil
}

// RotateStationKey issues a new key.
func (s *Server) RotateStationKey(ctx context.Context, req *datav1.RotateStationKeyRequest) (*datav1.RotateStationKeyResponse, error) {
	if _, err := s.authorize(ctx); err != nil {
		return nil, err
	}
	if err := checkID("id", req.GetId()); err != nil {
		return nil, err
	}
	overlap := time.Duration(req.GetOverlapSeconds()) * time.Second
	if overlap > maxOverlap {
		return nil, status.Error(codes.InvalidArgument, "overlap_seconds: at most 30 days")
	}
	keyID, key, err := s.admin.RotateKey(ctx, req.GetId(), overlap)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return &datav1.RotateStationKeyResponse{
		Key:                  &datav1.StationKey{KeyId: keyID, KeyHex: hex.EncodeToString(key)},
		PreviousValidUntilMs: time.Now().Add(overlap).UnixMilli(),
	}, nil
}

// ResetStationSeq records that a station's seq counter was reset, now by
// this server's clock: ingest forgets the station's replay window and the
// journal records received before it. Unknown and retired stations are
// NOT_FOUND.
func (s *Server) ResetStationSeq(ctx context.Context, req *datav1.ResetStationSeqRequest) (*datav1.ResetStationSeqResponse, error) {
	who, err := s.authorize(ctx)
	if err != nil {
		return nil, err
	}
	id := req.GetId()
	if err := checkID("id", id); err != nil {
		return nil, err
	}
	st, err := s.admin.ResetStationSeq(ctx, id, time.Now())
	switch {
	case errors.Is(err, metadb.ErrRetired):
		return nil, status.Errorf(codes.NotFound, "station %q is retired", id)
	case errors.Is(err, metadb.ErrNotFound):
		return nil, status.Errorf(codes.NotFound, "station %q not found", id)
	case err != nil:
		return nil, s.fail(ctx, err)
	}
	// A reset makes ingest accept seqs it refused before: who did it is
	// worth a record.
	s.log.InfoContext(ctx, "station seq counter reset", slog.String("station", id),
		slog.Int64("seq_reset_ms", st.SeqResetMs), slog.Bool("admin_token", who.Token), slog.String("key_id", who.KeyID))
	return &datav1.ResetStationSeqResponse{Station: Proto(st)}, nil
}

// authorize admits administrators: an admin token or an admin key.
func (s *Server) authorize(ctx context.Context) (auth.Principal, error) {
	if s.admin == nil {
		return auth.Principal{}, status.Error(codes.FailedPrecondition, "stations come from a registry file here; provisioning needs the metadata database (-database-url)")
	}
	return s.authz.Require(ctx, metadb.RoleAdmin)
}

// checkID checks a station ID given in field.
func checkID(field, id string) error {
	if id == "" || len(id) > 64 || strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return status.Error(codes.InvalidArgument, field+": 1 to 64 bytes, no control characters")
	}
	return nil
}

func checkPlace(name, net string, lat, lon float64) error {
	switch {
	case len(name) > 128:
		return status.Error(codes.InvalidArgument, "name: at most 128 bytes")
	case len(net) > 32:
		return status.Error(codes.InvalidArgument, "net: at most 32 bytes")
	case math.IsNaN(lat) || lat < -90 || lat > 90:
		return status.Error(codes.InvalidArgument, "lat: −90 to 90")
	case math.IsNaN(lon) || lon < -180 || lon > 180:
		return status.Error(codes.InvalidArgument, "lon: −180 to 180")
	}
	return nil
}

func (s *Server) fail(ctx context.Context, err error) error {
	return storeerr.Status(ctx, s.log, err, "station")
}

// Proto is a station as DataService gives it.
func Proto(st *registry.Station) *datav1.Station {
	return &datav1.Station{
		Id: st.ID, Name: st.Name, Net: st.Net, Lat: st.Lat, Lon: st.Lon, Code: st.Code, Active: st.InService(),
		SeqResetMs: st.SeqResetMs, NetworkCode: st.SEED.Network, StationCode: st.SEED.Station, LocationCode: st.SEED.Location,
		ElevationM: st.Elevation, ScaleGal: st.Scale(),
	}
}

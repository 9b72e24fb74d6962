// Package reports serves earthquake reports and detections through
// DataService, from the metadata database: lists with filters and opaque
// page tokens, single items, and the idempotent posting of reports by
// writers.
package reports

import (
	"context"
	"log/slog"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	datav1 "shindo.dev/gen/shindo/data/v1"
	"shindo.dev/lib/metadb"
	"shindo.dev/svc-dataapi/internal/auth"
	"shindo.dev/svc-dataapi/internal/storeerr"
)

// Page sizes.
const (
	DefaultPageSize = 50
	MaxPageSize     = metadb.MaxPage
)

// Store is what the server needs of the metadata database
// (metadb.Store).
type Store interface {
	ListReports(ctx context.Context, f metadb.ReportFilter) ([]metadb.Report, error)
	GetReport(ctx context.Context, id string) (*metadb.Report, error)
	CreateReport(ctx context.Context, r metadb.Report) (*metadb.Report, bool, error)
	ListDetections(ctx context.Context, f metadb.DetectionFilter) ([]metadb.Detection, error)
	GetDetection(ctx context.Context, id string) (*metadb.Detection, error)
}

// Authorizer checks that the caller holds a role (auth.Authenticator).
type Authorizer interface {
	Require(ctx context.Context, role string) (auth.Principal, error)
}

// Server implements the report and detection RPCs of DataService.
type Server struct {
	store   Store
	authz   Authorizer
	timeout time.Duration
	log     *slog.Logger
}

// New returns a server on store (nil without a database: every call then
// fails with Unimplemented). Each call's database work is bounded by
// timeout; past it the call fails with Unavailable.
func New(store Store, authz Authorizer, timeout time.Duration, log *slog.Logger) *Server {
	return &Server{store: store, authz: authz, timeout: timeout, log: log}
}

func (s *Server) ready(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if s.store == nil {
		return ctx, func() {}, status.Error(codes.Unimplemented, "reports and detections need the metadata database (-database-url)")
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	return ctx, cancel, nil
}

// ListReports lists reports, newest first.
func (s *Server) ListReports(ctx context.Context, req *datav1.ListReportsRequest) (*datav1.ListReportsResponse, error) {
	f, err := ReportFilter(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel, err := s.ready(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	want := f.Limit
	f.Limit++ // one more tells whether a next page exists
	list, err := s.store.ListReports(ctx, f)
	if err != nil {
		return nil, s.fail(ctx, err, "report")
	}
	out := &datav1.ListReportsResponse{Reports: make([]*datav1.Report, 0, min(len(list), want))}
	for i := range list {
		if i == want {
			last := list[want-1]
			out.NextPageToken = EncodeToken(KindReports, last.TimeMs, last.ID)
			break
		}
		out.Reports = append(out.Reports, ReportProto(&list[i]))
	}
	return out, nil
}

// ReportFilter checks a list request and turns it into a store filter
// (with the page size as Limit); errors are InvalidArgument statuses.
func ReportFilter(req *datav1.ListReportsRequest) (metadb.ReportFilter, error) {
	f := metadb.ReportFilter{
		FromMs: req.StartTimeMs, ToMs: req.EndTimeMs, MinMagnitude: req.MinMagnitude,
		MinLat: req.MinLat, MaxLat: req.MaxLat, MinLon: req.MinLon, MaxLon: req.MaxLon,
	}
	bad := func(msg string) (metadb.ReportFilter, error) {
		return metadb.ReportFilter{}, status.Error(codes.InvalidArgument, msg)
	}
	for _, t := range []*int64{req.StartTimeMs, req.EndTimeMs} {
		if t != nil && (*t < 0 || *t > metadb.MaxTimeMs) {
			return bad("start_time_ms, end_time_ms: Unix ms from 0 to 253402300799999")
		}
	}
	if req.StartTimeMs != nil && req.EndTimeMs != nil && *req.StartTimeMs > *req.EndTimeMs {
		return bad("start_time_ms after end_time_ms")
	}
	if m := req.MinMagnitude; m != nil && !(*m >= -5 && *m <= 12) {
		return bad("min_magnitude: −5 to 12")
	}
	if l := req.MinLevel; l != nil {
		if *l > metadb.MaxLevel {
			return bad("min_level: 0 to 9")
		}
		v := int(*l)
		f.MinLevel = &v
	}
	for _, v := range []*float64{req.MinLat, req.MaxLat} {
		if v != nil && !(*v >= -90 && *v <= 90) {
			return bad("min_lat, max_lat: −90 to 90")
		}
	}
	for _, v := range []*float64{req.MinLon, req.MaxLon} {
		if v != nil && !(*v >= -180 && *v <= 180) {
			return bad("min_lon, max_lon: −180 to 180")
		}
	}
	if req.MinLat != nil && req.MaxLat != nil && *req.MinLat > *req.MaxLat {
		return bad("min_lat above max_lat")
	}
	if req.MinLon != nil && req.MaxLon != nil && *req.MinLon > *req.MaxLon {
		return bad("min_lon east of max_lon")
	}
	size, err := pageSize(req.GetPageSize())
	if err != nil {
		return metadb.ReportFilter{}, err
	}
	f.Limit = size
	if tok := req.GetPageToken(); tok != "" {
		t, id, err := DecodeToken(KindReports, tok)
		if err != nil || metadb.CheckReportID(id) != nil {
			return bad(ErrToken.Error())
		}
		f.After = &metadb.ReportCursor{TimeMs: t, ID: id}
	}
	return f, nil
}

func pageSize(n uint32) (int, error) {
	switch {
	case n == 0:
		return DefaultPageSize, nil
	case n > MaxPageSize:
		return 0, status.Errorf(codes.InvalidArgument, "page_size: 1 to %d", MaxPageSize)
	}
	return int(n), nil
}

// GetReport returns one report with its areas.
func (s *Server) GetReport(ctx context.Context, req *datav1.GetReportRequest) (*datav1.GetReportResponse, error) {
	if err := metadb.CheckReportID(req.GetId()); err != nil {
		return nil, status.Error(codes.InvalidArgument, "id: 1 to 64 letters, digits and . _ : -")
	}
	ctx, cancel, err := s.ready(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	r, err := s.store.GetReport(ctx, req.GetId())
	if err != nil {
		return nil, s.fail(ctx, err, "report")
	}
	return &datav1.GetReportResponse{Report: ReportProto(r)}, nil
}

// CreateReport stores a posted report, idempotent by ID.
func (s *Server) CreateReport(ctx context.Context, req *datav1.CreateReportRequest) (*datav1.CreateReportResponse, error) {
	ctx, cancel, err := s.ready(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	if _, err := s.authz.Require(ctx, metadb.RoleWriter); err != nil {
		return nil, err
	}
	r := metadb.Report{
		ID: req.GetId(), TimeMs: req.GetTimeMs(), Lat: req.GetLat(), Lon: req.GetLon(), DepthKm: req.GetDepthKm(),
		Magnitude: req.GetMagnitude(), Location: req.GetLocation(),
	}
	if req.GetMaxLevel() > metadb.MaxLevel {
		return nil, status.Error(codes.InvalidArgument, "max_level: 0 to 9")
	}
	r.MaxLevel = int(req.GetMaxLevel())
	if len(req.GetAreas()) > metadb.MaxAreas {
		return nil, status.Errorf(codes.InvalidArgument, "areas: at most %d", metadb.MaxAreas)
	}
	for _, a := range req.GetAreas() {
		if a.GetLevel() > metadb.MaxLevel {
			return nil, status.Error(codes.InvalidArgument, "areas: level 0 to 9")
		}
		r.Areas = append(r.Areas, metadb.AreaLevel{Code: a.GetCode(), Level: int(a.GetLevel())})
	}
	stored, created, err := s.store.CreateReport(ctx, r)
	if err != nil {
		return nil, s.fail(ctx, err, "report")
	}
	return &datav1.CreateReportResponse{Report: ReportProto(stored), Created: created}, nil
}

// ListDetections lists detections, newest first trigger first.
func (s *Server) ListDetections(ctx context.Context, req *datav1.ListDetectionsRequest) (*datav1.ListDetectionsResponse, error) {
	f := metadb.DetectionFilter{ActiveOnly: req.GetActiveOnly(), SinceMs: req.SinceMs}
	if t := req.SinceMs; t != nil && (*t < 0 || *t > metadb.MaxTimeMs) {
		return nil, status.Error(codes.InvalidArgument, "since_ms: Unix ms from 0 to 253402300799999")
	}
	size, err := pageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	f.Limit = size + 1
	if tok := req.GetPageToken(); tok != "" {
		t, id, err := DecodeToken(KindDetections, tok)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, ErrToken.Error())
		}
		f.After = &metadb.DetectionCursor{FirstTriggerMs: t, ID: id}
	}
	ctx, cancel, err := s.ready(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	list, err := s.store.ListDetections(ctx, f)
	if err != nil {
		return nil, s.fail(ctx, err, "detection")
	}
	out := &datav1.ListDetectionsResponse{Detections: make([]*datav1.Detection, 0, min(len(list), size))}
	for i := range list {
		if i == size {
			last := list[size-1]
			out.NextPageToken = EncodeToken(KindDetections, last.FirstTriggerMs, last.ID)
			break
		}
		out.Detections = append(out.Detections, DetectionProto(&list[i]))
	}
	return out, nil
}

// GetDetection returns the latest update of a detection.
func (s *Server) GetDetection(ctx context.Context, req *datav1.GetDetectionRequest) (*datav1.GetDetectionResponse, error) {
	if id := req.GetId(); id == "" || len(id) > 64 {
		return nil, status.Error(codes.InvalidArgument, "id: 1 to 64 bytes")
	}
	ctx, cancel, err := s.ready(ctx)
	defer cancel()
	if err != nil {
		return nil, err
	}
	d, err := s.store.GetDetection(ctx, req.GetId())
	if err != nil {
		return nil, s.fail(ctx, err, "detection")
	}
	return &datav1.GetDetectionResponse{Detection: DetectionProto(d)}, nil
}

func (s *Server) fail(ctx context.Context, err error, what string) error {
	return storeerr.Status(ctx, s.log, err, what)
}

// ReportProto converts a stored report.
func ReportProto(r *metadb.Report) *datav1.Report {
	p := &datav1.Report{
		Id: r.ID, TimeMs: r.TimeMs, Lat: r.Lat, Lon: r.Lon, DepthKm: r.DepthKm, Magnitude: r.Magnitude,
		Location: r.Location, MaxLevel: uint32(r.MaxLevel), Md5: r.MD5, SourceDetectionId: r.SourceDetectionID,
		TremMs: r.TremMs, CreatedMs: r.CreatedAt.UnixMilli(), UpdatedMs: r.UpdatedAt.UnixMilli(),
	}
	for _, a := range r.Areas {
		p.Areas = append(p.Areas, &datav1.ReportArea{Code: a.Code, Level: uint32(a.Level)})
	}
	return p
}

// DetectionProto converts a stored detection.
func DetectionProto(d *metadb.Detection) *datav1.Detection {
	return &datav1.Detection{
		Id: d.ID, Serial: d.Serial, Final: d.Final, OriginTimeMs: d.OriginTimeMs, Lat: finite(d.Lat), Lon: finite(d.Lon),
		DepthKm: finite(d.DepthKm), Magnitude: finite(d.Magnitude), Location: d.Location, LocationCode: d.LocationCode,
		MaxLevel: uint32(d.MaxLevel), FirstTriggerMs: d.FirstTriggerMs, UpdatedMs: d.UpdatedMs, Stations: d.Stations,
	}
}

func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

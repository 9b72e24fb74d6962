package dataapi

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	datav1 "shindo.dev/gen/shindo/data/v1"
	"shindo.dev/lib/metadb"
	"shindo.dev/lib/service"
	"shindo.dev/lib/stationsource"
	"shindo.dev/svc-dataapi/internal/stations"
	"shindo.dev/svc-dataapi/internal/watch"
)

// watcher sets up the watches of reports and stations the edges subscribe
// to, or returns nil without the database. They read and listen on the
// primary (-database-url), never on -read-database-url: notifications
// are not replicated to a standby.
func watcher(svc *service.Service, reg *stationsource.Opened, cfg Config) *watch.Server {
	if reg.Pool == nil {
		return nil
	}
	o := watch.Defaults()
	o.MaxWatchers, o.Timeout = cfg.MaxWatchers, cfg.DBTimeout
	connCfg := reg.Pool.Config().ConnConfig
	if connCfg.RuntimeParams == nil {
		connCfg.RuntimeParams = map[string]string{}
	}
	connCfg.RuntimeParams["application_name"] = "shindo-dataapi-watch"
	w := watch.New(metadb.NewStore(reg.Pool), connCfg, stations.Proto, o, svc.Stopping(), svc.Logger())
	svc.Metrics().MustRegister(w.Collectors()...)
	svc.Go("report and station watches", w)
	return w
}

// errNoWatch answers the watches of a data API without the database.
var errNoWatch = status.Error(codes.Unimplemented, "watches need the metadata database (-database-url)")

func (d dataServer) WatchReports(r *datav1.WatchReportsRequest, s grpc.ServerStreamingServer[datav1.WatchReportsResponse]) error {
	if d.watch == nil {
		return errNoWatch
	}
	return d.watch.WatchReports(r, s)
}

func (d dataServer) WatchStations(r *datav1.WatchStationsRequest, s grpc.ServerStreamingServer[datav1.WatchStationsResponse]) error {
	if d.watch == nil {
		return errNoWatch
	}
	return d.watch.WatchStations(r, s)
}

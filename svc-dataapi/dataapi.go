// Package dataapi is svc-dataapi: a core's public data API, served over
// gRPC and, through grpc-gateway, as REST with an OpenAPI document.
package dataapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	"shindo.dev/gen/openapi"
	datav1 "shindo.dev/gen/shindo/data/v1"
	ingestv1 "shindo.dev/gen/shindo/ingest/v1"
	"shindo.dev/lib/service"
	"shindo.dev/lib/stationdb"
	"shindo.dev/lib/stationsource"
	"shindo.dev/svc-dataapi/internal/stations"
)

// Name is the binary and service name.
const Name = "shindo-dataapi"

// Config is svc-dataapi's configuration (env prefix SHINDO_DATAAPI_).
type Config struct {
	service.Common
	stationsource.Config
	HTTPAddr    string   `conf:"http-addr" help:"REST listen address"`
	Ingest      string   `conf:"ingest" help:"svc-ingest gRPC address of this core, for /v1/links; empty: links not served"`
	WaveformAPI string   `conf:"waveform-api" help:"svc-waveform HTTP base URL of this core (http://host:port), for /v1/waveforms/…; empty: waveforms not served"`
	AdminTokens []string `conf:"admin-tokens" secret:"true" help:"tokens that authorize provisioning calls (authorization: Bearer <token>), comma-separated"`
}

// DefaultConfig returns the configuration with svc-dataapi's default ports.
func DefaultConfig() Config {
	return Config{Common: service.Common{GRPCAddr: ":7402", AdminAddr: ":7409"}, HTTPAddr: ":7401"}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	errs := []error{c.ValidateCommon()}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("http-addr %q: want host:port", c.HTTPAddr))
	}
	errs = append(errs, c.Config.Validate())
	if c.WaveformAPI != "" {
		if u, err := url.Parse(c.WaveformAPI); err != nil || u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			errs = append(errs, fmt.Errorf("waveform-api %q: want http://host:port", c.WaveformAPI))
		}
	}
	for _, t := range c.AdminTokens {
		if len(t) < 16 {
			errs = append(errs, errors.New("admin-tokens: each at least 16 characters"))
			break
		}
	}
	return errors.Join(errs...)
}

// Run runs svc-dataapi until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	return service.Serve(ctx, Name, cfg.Common, &cfg, func(ctx context.Context, svc *service.Service) error {
		reg, err := stationsource.Attach(ctx, svc, cfg.Config, cfg.DependencyWait)
		if err != nil {
			return err
		}
		var admin stations.Admin
		if reg.Pool != nil {
			admin = stationdb.NewStore(reg.Pool)
		}
		data := stations.New(reg.Source.Current, admin, cfg.AdminTokens, svc.Logger())
		datav1.RegisterDataServiceServer(svc.GRPC(), data)
		svc.SetServingStatus(datav1.DataService_ServiceDesc.ServiceName, true)

		gw := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
		}))
		if err := datav1.RegisterDataServiceHandlerServer(ctx, gw, data); err != nil {
			return fmt.Errorf("register gateway: %w", err)
		}
		if cfg.Ingest != "" {
			// Link quality lives in ingest; the gateway forwards to it. The
			// connection is made lazily, so ingest may start after us.
			conn, err := grpc.NewClient(cfg.Ingest, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithStatsHandler(otelgrpc.NewClientHandler()))
			if err != nil {
				return fmt.Errorf("ingest %s: %w", cfg.Ingest, err)
			}
			svc.OnShutdown("ingest connection", func(context.Context) error { return conn.Close() })
			if err := ingestv1.RegisterIngestServiceHandlerClient(ctx, gw, ingestv1.NewIngestServiceClient(conn)); err != nil {
				return fmt.Errorf("register links gateway: %w", err)
			}
		}
		mux := http.NewServeMux()
		mux.Handle("/", gw)
		if cfg.WaveformAPI != "" {
			// The archive answers its own REST routes (JSON and miniSEED
			// files); the data API passes them through.
			target, _ := url.Parse(cfg.WaveformAPI)
			proxy := &httputil.ReverseProxy{
				Rewrite: func(pr *httputil.ProxyRequest) {
					pr.SetURL(target)
					pr.SetXForwarded()
				},
				Transport: otelhttp.NewTransport(http.DefaultTransport),
				ErrorLog:  slog.NewLogLogger(svc.Logger().Handler(), slog.LevelWarn),
			}
			mux.Handle("GET /v1/waveforms/", proxy)
		}
		mux.HandleFunc("GET /readyz", svc.ServeReady) // probed by the edges' data-API routing
		mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(openapi.JSON)
		})
		_, err = svc.Listen("data api", cfg.HTTPAddr, mux)
		return err
	})
}

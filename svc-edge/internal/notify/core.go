package notify

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	natsbusv1 "shindo.dev/gen/shindo/natsbus/v1"
	"shindo.dev/lib/natsbus"
	"shindo.dev/lib/telemetry"
)

// errNotHere means a core answered and does not hold the payload.
var errNotHere = errors.New("payload not on this core")

// errUndecodable means a core holds something at the payload's stream
// sequence that is not a natsbus.NotificationPayload: a payload stored by a
// version of the edges before natsbus (JSON), or a corrupt one. That copy
// is as good as gone.
var errUndecodable = errors.New("stored payload undecodable")

// core is one core's NATS server and its stream of natsbus.Notifications. The connection
// reconnects forever; the stream is (re)created whenever the core is
// connected and it is not known to exist.
type core struct {
	url   string
	label string // for logs and metrics until the name is known
	nc    *nats.Conn
	js    jetstream.JetStream

	ensureMu sync.Mutex                // one stream creation at a time
	state    atomic.Pointer[coreState] // read without waiting for a creation
	lastErr  atomic.Pointer[string]    // last problem logged, to log each once
}

// problem reports whether err is a new problem worth logging (nil clears
// the last one).
func (c *core) problem(err error) bool {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	prev := c.lastErr.Swap(&msg)
	return err != nil && (prev == nil || *prev != msg)
}

// coreState is what is known of a core: its name (JetStream domain, the
// site) once it has been reached, and its stream while it is usable.
type coreState struct {
	name   string
	stream jetstream.Stream
}

func newCore(rawURL string) *core {
	label := rawURL
	if p, err := url.Parse(rawURL); err == nil {
		label = p.Host
	}
	c := &core{url: rawURL, label: label}
	c.state.Store(&coreState{})
	return c
}

// connect starts connecting in the background: a core that is down now is
// used as soon as it is up.
func (c *core) connect(site string, tlsConfig *tls.Config, log *slog.Logger) error {
	opts := []nats.Option{
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("core disconnected", slog.String("core", c.Name()), slog.Any("error", err))
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			log.Info("core reconnected", slog.String("core", c.Name()))
		}),
		nats.ConnectHandler(func(*nats.Conn) {
			log.Info("core connected", slog.String("core", c.Name()))
		}),
		nats.Name("shindo-edge " + site + " notify"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.RetryOnFailedConnect(true),
		nats.PingInterval(2 * time.Second),
		nats.MaxPingsOutstanding(2),
		// Posts wait for a JetStream ack; one queued while disconnected
		// would be sent long after its poster gave up.
		nats.ReconnectBufSize(-1),
	}
	if tlsConfig != nil {
		opts = append(opts, nats.Secure(tlsConfig))
	}
	nc, err := nats.Connect(c.url, opts...)
	if err != nil {
		return fmt.Errorf("nats %s: %w", redact(c.url), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return fmt.Errorf("jetstream %s: %w", redact(c.url), err)
	}
	c.nc, c.js = nc, js
	return nil
}

// Name is the core's name (its JetStream domain), or its address while
// unknown.
func (c *core) Name() string {
	if n := c.state.Load().name; n != "" {
		return n
	}
	return c.label
}

// known returns the core's name once it has been reached, else "".
func (c *core) known() string { return c.state.Load().name }

// ready returns the stream when the core is connected and the stream
// exists, creating it if needed. claim registers the core's name and
// reports false when another configured core already has it.
func (c *core) ready(ctx context.Context, cfg streamConfig, claim func(*core, string) bool) (jetstream.Stream, error) {
	if !c.nc.IsConnected() {
		return nil, fmt.Errorf("core %s: not connected", c.Name())
	}
	if st := c.state.Load().stream; st != nil {
		return st, nil
	}
	c.ensureMu.Lock()
	defer c.ensureMu.Unlock()
	if st := c.state.Load().stream; st != nil {
		return st, nil
	}
	info, err := c.js.AccountInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("core %s: jetstream account: %w", c.Name(), err)
	}
	name := info.Domain
	if name == "" {
		name = c.nc.ConnectedServerName()
	}
	if name == "" {
		return nil, fmt.Errorf("core %s: no JetStream domain or server name: start each core's NATS with its site as JetStream domain", c.label)
	}
	if !claim(c, name) {
		return nil, fmt.Errorf("core %s: JetStream domain %q is also another configured core's: give each core's own NATS URL", c.label, name)
	}
	st, err := c.js.CreateOrUpdateStream(ctx, cfg.jetstream())
	if err != nil {
		return nil, fmt.Errorf("core %s: stream %s: %w", name, natsbus.Notifications.Stream(), err)
	}
	c.state.Store(&coreState{name: name, stream: st})
	return st, nil
}

// reset forgets the stream after an error that says it is gone (a core
// whose store was replaced), so the next use recreates it.
func (c *core) reset(err error) {
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		c.state.Store(&coreState{name: c.known()})
	}
}

// streamConfig holds what the stream's configuration depends on beyond
// the contract (natsbus.Notifications).
type streamConfig struct {
	maxAge   time.Duration
	maxBytes int64
	maxMsg   int
}

func (s streamConfig) jetstream() jetstream.StreamConfig {
	cfg := natsbus.Notifications.StreamConfig()
	cfg.MaxAge = s.maxAge
	cfg.MaxBytes = s.maxBytes
	cfg.MaxMsgSize = int32(s.maxMsg)
	return cfg
}

// publish stores a payload and returns its stream sequence. The message
// headers keep the trace context of the request that posted it (natsbus
// sets them), which the edge delivering it links to (get).
func (c *core) publish(ctx context.Context, st jetstream.Stream, client string, p *natsbusv1.NotificationPayload) (uint64, error) {
	msg, err := natsbus.Notifications.Msg(ctx, client, p)
	if err != nil {
		return 0, err
	}
	ack, err := c.js.PublishMsg(ctx, msg,
		jetstream.WithMsgID(client+"/"+p.GetId()), jetstream.WithExpectStream(natsbus.Notifications.Stream()))
	if err != nil {
		c.reset(err)
		return 0, err
	}
	return ack.Sequence, nil
}

// get reads the payload of client's notification id at stream sequence
// seq; errNotHere when the core answers without it, errUndecodable when
// what it holds there is not a payload.
func (c *core) get(ctx context.Context, st jetstream.Stream, client, id string, seq uint64) (*natsbusv1.NotificationPayload, error) {
	m, err := st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, errNotHere
	}
	if err != nil {
		c.reset(err)
		return nil, err
	}
	p, err := natsbus.Notifications.Decode(m.Data)
	if err != nil {
		return nil, fmt.Errorf("%w: core %s, sequence %d: %w", errUndecodable, c.Name(), seq, err)
	}
	if p.GetId() != id || p.GetClient() != client {
		// Another message at that sequence: the core's stream was
		// recreated since; this copy is gone.
		return nil, errNotHere
	}
	// Delivery happens in another request than the post, maybe at
	// another edge: a link, not a parent.
	if posted := trace.SpanContextFromContext(telemetry.ExtractNATS(context.Background(), m.Header)); posted.IsValid() {
		trace.SpanFromContext(ctx).AddLink(trace.Link{SpanContext: posted})
	}
	return p, nil
}

func (c *core) close() {
	if c.nc != nil {
		c.nc.Close()
	}
}

// Package natsbus is the Go side of shindo's NATS contract
// (proto/shindo/natsbus/v1): one Hop per payload message, its subject and
// stream derived from the message's hop option through protoreflect, with
// the typed encoding and decoding of its payload. Publishers and consumers
// alike take subjects, stream names and stream settings from here, so no
// service spells one of its own.
//
// Every message is built by Hop.Msg or Hop.Reply, which take the
// publication's context: what a NATS message carries of its context
// (headers) is added in one place.
package natsbus

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	natsbusv1 "shindo.dev/gen/shindo/natsbus/v1"
	"shindo.dev/lib/telemetry"
)

// The hops, one per message of natsbus.proto.
var (
	// Snapshots: every snapshot of a core's svc-rts, {site} the core's.
	Snapshots = declare[*natsbusv1.SnapshotPublished]()
	// Detections: detection updates, stream DETECTIONS, {site} the core's.
	Detections = declare[*natsbusv1.DetectionPublished]()
	// DetectorSync: a core's svc-rts asking its peer for its detection
	// state, served at {site} by the core answering.
	DetectorSync = declare[*natsbusv1.DetectorSync]()
	// Notifications: notification payloads, stream NOTIFY, {client} the
	// client's ID.
	Notifications = declare[*natsbusv1.NotificationPayload]()
	// Sync: the exchange between the cores, served at {site} by the core
	// answering.
	Sync = declare[*natsbusv1.SyncFrame]()
)

// Declared describes a hop whatever its payload type.
type Declared interface {
	// Message is the payload message's full name.
	Message() protoreflect.FullName
	// Pattern is the subject as declared, with its placeholder.
	Pattern() string
	// Filter matches the subject whatever the placeholder's value.
	Filter() string
	// Stream is the JetStream stream keeping the messages, "" if none.
	Stream() string
	// Request reports whether the subject is served as a request.
	Request() bool
}

// All returns every hop, in the order of natsbus.proto.
func All() []Declared { return []Declared{Snapshots, Detections, DetectorSync, Notifications, Sync} }

// Hop is one NATS hop carrying messages of type M.
type Hop[M proto.Message] struct {
	desc protoreflect.MessageDescriptor
	spec *natsbusv1.Hop
	// The subject is prefix + value + suffix.
	prefix, suffix string
}

// declare reads M's hop option. A message without a valid one is a broken
// contract, caught by this package's tests before any binary is built, so
// it panics as regexp.MustCompile does.
func declare[M proto.Message]() *Hop[M] {
	var zero M
	h, err := parse[M](zero.ProtoReflect().Descriptor())
	if err != nil {
		panic(err)
	}
	return h
}

// parse reads and checks the hop option of d.
func parse[M proto.Message](d protoreflect.MessageDescriptor) (*Hop[M], error) {
	spec, ok := proto.GetExtension(d.Options(), natsbusv1.E_Hop).(*natsbusv1.Hop)
	if !ok || spec == nil || spec.GetSubject() == "" {
		return nil, fmt.Errorf("natsbus: %s has no hop subject", d.FullName())
	}
	h := &Hop[M]{desc: d, spec: spec}
	tokens := strings.Split(spec.GetSubject(), ".")
	placeholder := -1
	for i, tok := range tokens {
		switch {
		case len(tok) > 2 && tok[0] == '{' && tok[len(tok)-1] == '}' && !strings.ContainsAny(tok[1:len(tok)-1], "{}"):
			if placeholder >= 0 {
				return nil, fmt.Errorf("natsbus: %s: subject %q has more than one placeholder", d.FullName(), spec.GetSubject())
			}
			placeholder = i
		case tok == "" || strings.ContainsAny(tok, "*>{}~ \t\r\n"):
			return nil, fmt.Errorf("natsbus: %s: subject %q: bad token %q", d.FullName(), spec.GetSubject(), tok)
		}
	}
	if placeholder < 0 {
		return nil, fmt.Errorf("natsbus: %s: subject %q has no placeholder", d.FullName(), spec.GetSubject())
	}
	h.prefix = strings.Join(tokens[:placeholder], ".")
	if h.prefix != "" {
		h.prefix += "."
	}
	if rest := strings.Join(tokens[placeholder+1:], "."); rest != "" {
		h.suffix = "." + rest
	}
	if st := spec.GetStream(); st != nil {
		if st.GetName() == "" || strings.ContainsAny(st.GetName(), ".*> \t\r\n") {
			return nil, fmt.Errorf("natsbus: %s: stream name %q", d.FullName(), st.GetName())
		}
		if st.GetStorage() == natsbusv1.Storage_STORAGE_UNSPECIFIED || st.GetDiscard() == natsbusv1.Discard_DISCARD_UNSPECIFIED {
			return nil, fmt.Errorf("natsbus: %s: stream %s must declare its storage and discard policy", d.FullName(), st.GetName())
		}
		if spec.GetRequest() {
			return nil, fmt.Errorf("natsbus: %s: a request subject is not kept in a stream", d.FullName())
		}
	}
	return h, nil
}

// Message is the payload message's full name.
func (h *Hop[M]) Message() protoreflect.FullName { return h.desc.FullName() }

// Pattern is the subject as declared, with its placeholder.
func (h *Hop[M]) Pattern() string { return h.spec.GetSubject() }

// Subject is the subject for one value of the placeholder (a site, a
// client ID), made one token by Token.
func (h *Hop[M]) Subject(value string) string { return h.prefix + Token(value) + h.suffix }

// Filter matches the subject whatever the placeholder's value: the
// subjects of the hop's stream.
func (h *Hop[M]) Filter() string { return h.prefix + "*" + h.suffix }

// Stream is the name of the JetStream stream keeping the messages, "" for
// a hop on plain NATS.
func (h *Hop[M]) Stream() string { return h.spec.GetStream().GetName() }

// Request reports whether the subject is served as a request, answered on
// the reply subject with messages of the same type.
func (h *Hop[M]) Request() bool { return h.spec.GetRequest() }

// StreamConfig is the configuration of the hop's stream as the contract
// declares it: the creator adds what depends on its own configuration
// (MaxAge when the contract leaves it out, MaxBytes, MaxMsgSize). The zero
// configuration for a hop without a stream.
func (h *Hop[M]) StreamConfig() jetstream.StreamConfig {
	st := h.spec.GetStream()
	if st == nil {
		return jetstream.StreamConfig{}
	}
	cfg := jetstream.StreamConfig{
		Name:        st.GetName(),
		Description: st.GetDescription(),
		Subjects:    []string{h.Filter()},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardOld,
		Duplicates:  st.GetDuplicateWindow().AsDuration(),
		MaxAge:      st.GetMaxAge().AsDuration(),
		AllowDirect: st.GetAllowDirect(),
		// Each core's server stands alone: nothing is clustered across
		// sites (cli/internal/natscmd).
		Replicas: 1,
	}
	if st.GetStorage() == natsbusv1.Storage_STORAGE_MEMORY {
		cfg.Storage = jetstream.MemoryStorage
	}
	if st.GetDiscard() == natsbusv1.Discard_DISCARD_NEW {
		cfg.Discard = jetstream.DiscardNew
	}
	return cfg
}

// Encode serializes a payload.
func (h *Hop[M]) Encode(m M) ([]byte, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", h.desc.Name(), err)
	}
	return b, nil
}

// ErrUndecodable is the error of Decode: the bytes are not a payload of
// the hop (a corrupt message, or one of an older version of the contract
// still in a stream).
var ErrUndecodable = errors.New("not a payload of this hop")

// Decode parses a payload.
func (h *Hop[M]) Decode(b []byte) (M, error) {
	var zero M
	m := zero.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, m); err != nil {
		return zero, fmt.Errorf("decode %s: %w: %w", h.desc.Name(), ErrUndecodable, err)
	}
	return m, nil
}

// Msg returns the message carrying m on the subject for value.
func (h *Hop[M]) Msg(ctx context.Context, value string, m M) (*nats.Msg, error) {
	return h.msg(ctx, h.Subject(value), m)
}

// Reply returns the message carrying m to reply, a request's reply subject.
func (h *Hop[M]) Reply(ctx context.Context, reply string, m M) (*nats.Msg, error) {
	if !h.Request() {
		return nil, fmt.Errorf("natsbus: %s is not a request hop", h.desc.Name())
	}
	if reply == "" {
		return nil, errors.New("natsbus: the request has no reply subject")
	}
	return h.msg(ctx, reply, m)
}

// msg builds every message of the bus. ctx is the publication's: headers
// that carry something of it are set here.
func (h *Hop[M]) msg(ctx context.Context, subject string, m M) (*nats.Msg, error) {
	b, err := h.Encode(m)
	if err != nil {
		return nil, err
	}
	msg := &nats.Msg{Subject: subject, Data: b, Header: nats.Header{}}
	// The trace the publication belongs to, for the receiver to continue
	// (telemetry.ExtractNATS); nothing when it is not sampled.
	telemetry.InjectNATS(ctx, msg.Header)
	return msg, nil
}

// Token makes a value one subject token: dots, which would split it, become
// '~'. The values put in subjects (sites, client IDs) have no '~', so the
// mapping is one to one.
func Token(value string) string { return strings.ReplaceAll(value, ".", "~") }

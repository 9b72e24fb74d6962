package natsbus

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	natsbusv1 "shindo.dev/gen/shindo/natsbus/v1"
	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

func TestDerivedNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		hop                 Declared
		subjectOf           func(string) string
		value, want, filter string
		stream, pattern     string
		request             bool
		message             protoreflect.FullName
	}{
		{hop: Snapshots, subjectOf: Snapshots.Subject, value: "TNN-1", want: "shindo.rts.TNN-1.snapshot",
			filter: "shindo.rts.*.snapshot", pattern: "shindo.rts.{site}.snapshot", message: "shindo.natsbus.v1.SnapshotPublished"},
		{hop: Detections, subjectOf: Detections.Subject, value: "TYO-1", want: "shindo.detections.TYO-1",
			filter: "shindo.detections.*", stream: "DETECTIONS", pattern: "shindo.detections.{site}", message: "shindo.natsbus.v1.DetectionPublished"},
		{hop: Notifications, subjectOf: Notifications.Subject, value: "app1.user-42_abcdefgh", want: "shindo.notify.app1~user-42_abcdefgh",
			filter: "shindo.notify.*", stream: "NOTIFY", pattern: "shindo.notify.{client}", message: "shindo.natsbus.v1.NotificationPayload"},
		{hop: Sync, subjectOf: Sync.Subject, value: "TNN-1", want: "shindo.sync.TNN-1.diff",
			filter: "shindo.sync.*.diff", request: true, pattern: "shindo.sync.{site}.diff", message: "shindo.natsbus.v1.SyncFrame"},
	} {
		t.Run(string(c.message.Name()), func(t *testing.T) {
			if got := c.subjectOf(c.value); got != c.want {
				t.Errorf("Subject(%q) = %q, want %q", c.value, got, c.want)
			}
			if got := c.hop.Filter(); got != c.filter {
				t.Errorf("Filter() = %q, want %q", got, c.filter)
			}
			if got := c.hop.Stream(); got != c.stream {
				t.Errorf("Stream() = %q, want %q", got, c.stream)
			}
			if got := c.hop.Request(); got != c.request {
				t.Errorf("Request() = %v, want %v", got, c.request)
			}
			if got := c.hop.Pattern(); got != c.pattern {
				t.Errorf("Pattern() = %q, want %q", got, c.pattern)
			}
			if got := c.hop.Message(); got != c.message {
				t.Errorf("Message() = %q, want %q", got, c.message)
			}
		})
	}
}

// TestEveryMessageHasAHop: each message of natsbus.proto declares a valid
// hop and has a Hop here; no two hops share a subject or a stream.
func TestEveryMessageHasAHop(t *testing.T) {
	t.Parallel()
	file := natsbusv1.File_shindo_natsbus_v1_natsbus_proto
	var declared []protoreflect.FullName
	for _, h := range All() {
		declared = append(declared, h.Message())
	}
	msgs := file.Messages()
	if msgs.Len() == 0 {
		t.Fatal("natsbus.proto declares no message")
	}
	var inFile []protoreflect.FullName
	for i := range msgs.Len() {
		d := msgs.Get(i)
		inFile = append(inFile, d.FullName())
		if _, err := parse[proto.Message](d); err != nil {
			t.Errorf("%s: %v", d.FullName(), err)
		}
		if !slices.Contains(declared, d.FullName()) {
			t.Errorf("%s has no Hop in natsbus.All", d.FullName())
		}
		if d.Messages().Len() != 0 {
			t.Errorf("%s nests messages: every payload of the bus is a top-level message with its own hop", d.FullName())
		}
	}
	if !slices.Equal(inFile, declared) {
		t.Errorf("natsbus.All() = %v, natsbus.proto declares %v", declared, inFile)
	}
	all := All()
	for i, a := range all {
		for _, b := range all[i+1:] {
			if overlap(a.Filter(), b.Filter()) {
				t.Errorf("%s (%s) and %s (%s) share subjects", a.Message(), a.Pattern(), b.Message(), b.Pattern())
			}
			if a.Stream() != "" && a.Stream() == b.Stream() {
				t.Errorf("%s and %s share stream %s", a.Message(), b.Message(), a.Stream())
			}
		}
	}
}

// overlap reports whether two filters of single-token wildcards match a
// common subject.
func overlap(a, b string) bool {
	ta, tb := strings.Split(a, "."), strings.Split(b, ".")
	if len(ta) != len(tb) {
		return false
	}
	for i := range ta {
		if ta[i] != tb[i] && ta[i] != "*" && tb[i] != "*" {
			return false
		}
	}
	return true
}

// TestParseRefuses: options that do not make a hop are refused with the
// message named.
func TestParseRefuses(t *testing.T) {
	t.Parallel()
	good := &natsbusv1.Stream{Name: "S", Storage: natsbusv1.Storage_STORAGE_FILE, Discard: natsbusv1.Discard_DISCARD_OLD}
	for _, c := range []struct {
		name string
		hop  *natsbusv1.Hop // nil: no option at all
		want string
	}{
		{"no option", nil, "no hop subject"},
		{"empty subject", &natsbusv1.Hop{}, "no hop subject"},
		{"no placeholder", &natsbusv1.Hop{Subject: "shindo.x"}, "no placeholder"},
		{"two placeholders", &natsbusv1.Hop{Subject: "shindo.{a}.{b}"}, "more than one placeholder"},
		{"wildcard", &natsbusv1.Hop{Subject: "shindo.*.{site}"}, "bad token"},
		{"tail wildcard", &natsbusv1.Hop{Subject: "shindo.{site}.>"}, "bad token"},
		{"empty token", &natsbusv1.Hop{Subject: "shindo..{site}"}, "bad token"},
		{"space", &natsbusv1.Hop{Subject: "shindo x.{site}"}, "bad token"},
		{"empty placeholder", &natsbusv1.Hop{Subject: "shindo.{}"}, "bad token"},
		{"stream without name", &natsbusv1.Hop{Subject: "shindo.{site}", Stream: &natsbusv1.Stream{Storage: 1, Discard: 1}}, "stream name"},
		{"stream name with dot", &natsbusv1.Hop{Subject: "shindo.{site}", Stream: &natsbusv1.Stream{Name: "A.B", Storage: 1, Discard: 1}}, "stream name"},
		{"storage unspecified", &natsbusv1.Hop{Subject: "shindo.{site}", Stream: &natsbusv1.Stream{Name: "S", Discard: 1}}, "storage and discard"},
		{"discard unspecified", &natsbusv1.Hop{Subject: "shindo.{site}", Stream: &natsbusv1.Stream{Name: "S", Storage: 1}}, "storage and discard"},
		{"request in a stream", &natsbusv1.Hop{Subject: "shindo.{site}", Stream: good, Request: true}, "request subject"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse[proto.Message](message(t, c.hop))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "test.v1.Payload") {
				t.Fatalf("err = %v, want one naming test.v1.Payload and %q", err, c.want)
			}
		})
	}
	h, err := parse[proto.Message](message(t, &natsbusv1.Hop{Subject: "{site}", Stream: good}))
	if err != nil {
		t.Fatal(err)
	}
	if h.Subject("a.b") != "a~b" || h.Filter() != "*" || h.StreamConfig().Subjects[0] != "*" {
		t.Fatalf("placeholder alone: subject %q, filter %q", h.Subject("a.b"), h.Filter())
	}
}

// message builds a message descriptor test.v1.Payload with hop as its
// option.
func message(t *testing.T, hop *natsbusv1.Hop) protoreflect.MessageDescriptor {
	t.Helper()
	opts := &descriptorpb.MessageOptions{}
	if hop != nil {
		proto.SetExtension(opts, natsbusv1.E_Hop, hop)
	}
	f, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:        proto.String("test/v1/test.proto"),
		Package:     proto.String("test.v1"),
		Syntax:      proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Payload"), Options: opts}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f.Messages().Get(0)
}

func TestStreamConfig(t *testing.T) {
	t.Parallel()
	det := Detections.StreamConfig()
	if det.Name != "DETECTIONS" || !slices.Equal(det.Subjects, []string{"shindo.detections.*"}) || det.Storage != jetstream.FileStorage ||
		det.Discard != jetstream.DiscardOld || det.Retention != jetstream.LimitsPolicy || det.Duplicates != 10*time.Minute ||
		det.MaxAge != 7*24*time.Hour || det.AllowDirect || det.Replicas != 1 || det.Description == "" {
		t.Errorf("DETECTIONS: %+v", det)
	}
	not := Notifications.StreamConfig()
	if not.Name != "NOTIFY" || !slices.Equal(not.Subjects, []string{"shindo.notify.*"}) || not.Storage != jetstream.FileStorage ||
		not.Discard != jetstream.DiscardNew || not.Duplicates != 2*time.Minute || not.MaxAge != 0 || !not.AllowDirect || not.Replicas != 1 {
		t.Errorf("NOTIFY: %+v", not)
	}
	if cfg := Snapshots.StreamConfig(); cfg.Name != "" || cfg.Subjects != nil {
		t.Errorf("snapshots are kept nowhere, got %+v", cfg)
	}
}

func TestDecodeRefusesGarbage(t *testing.T) {
	t.Parallel()
	for _, b := range [][]byte{{0xff, 0xff}, []byte(`{"id":"x","client":"y","time":1,"data":1}`)} {
		if _, err := Notifications.Decode(b); !errors.Is(err, ErrUndecodable) || !strings.Contains(err.Error(), "NotificationPayload") {
			t.Errorf("Decode(%q): %v, want ErrUndecodable naming the message", b, err)
		}
	}
}

// TestOnNATS carries each kind of hop through a real NATS server: a stream
// created from the contract takes what is published on the hop's
// subjects, plain messages reach a subscriber of the filter, and a request
// is answered on its reply subject.
func TestOnNATS(t *testing.T) {
	t.Parallel()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	t.Run("stream", func(t *testing.T) {
		cfg := Notifications.StreamConfig()
		cfg.MaxAge = time.Hour
		st, err := js.CreateOrUpdateStream(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		want := &natsbusv1.NotificationPayload{Id: "n1", Client: "app.user-0123456789", TimeMs: 1764633600000, Data: []byte(`{"a":"<b>"}`)}
		msg, err := Notifications.Msg(ctx, want.GetClient(), want)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := js.PublishMsg(ctx, msg, jetstream.WithExpectStream(Notifications.Stream()))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := st.GetMsg(ctx, ack.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Notifications.Decode(raw.Data)
		if err != nil {
			t.Fatal(err)
		}
		if raw.Subject != "shindo.notify.app~user-0123456789" || !proto.Equal(got, want) {
			t.Fatalf("stored %s %v, want %v", raw.Subject, got, want)
		}
	})

	t.Run("plain", func(t *testing.T) {
		sub, err := nc.SubscribeSync(Snapshots.Filter())
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		want := &natsbusv1.SnapshotPublished{Snapshot: &rtsv1.Snapshot{TimeMs: 1000, Site: "TYO-1"}}
		msg, err := Snapshots.Msg(ctx, "TYO-1", want)
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Snapshots.Decode(m.Data)
		if err != nil || m.Subject != "shindo.rts.TYO-1.snapshot" || !proto.Equal(got, want) {
			t.Fatalf("got %s %v (%v), want %v", m.Subject, got, err, want)
		}
		if _, err := Snapshots.Reply(ctx, "_INBOX.x", want); err == nil {
			t.Fatal("Reply on a hop that is not a request: no error")
		}
	})

	t.Run("request", func(t *testing.T) {
		sub, err := nc.Subscribe(Sync.Subject("TNN-1"), func(m *nats.Msg) {
			req, err := Sync.Decode(m.Data)
			if err != nil {
				return
			}
			if resp, err := Sync.Reply(ctx, m.Reply, &natsbusv1.SyncFrame{Compression: natsbusv1.Compression_COMPRESSION_NONE, Message: append([]byte("re:"), req.GetMessage()...)}); err == nil {
				_ = nc.PublishMsg(resp)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		req, err := Sync.Msg(ctx, "TNN-1", &natsbusv1.SyncFrame{Compression: natsbusv1.Compression_COMPRESSION_NONE, Message: []byte("ask")})
		if err != nil {
			t.Fatal(err)
		}
		m, err := nc.RequestMsg(req, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Sync.Decode(m.Data)
		if err != nil || string(got.GetMessage()) != "re:ask" {
			t.Fatalf("answer %v (%v)", got, err)
		}
		if _, err := Sync.Reply(ctx, "", got); err == nil {
			t.Fatal("Reply without a reply subject: no error")
		}
	})
}

package stationwire

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	stationv1 "shindo.dev/gen/shindo/station/v1"
)

var testKey = bytes.Repeat([]byte{0x42}, 32)

func intensityPacket() *stationv1.Packet {
	return &stationv1.Packet{
		StationId: "S0001", Seq: 7, SentAtMs: 1_700_000_000_000,
		Body: &stationv1.Packet_Intensity{Intensity: &stationv1.IntensityFrame{
			WindowEndMs: 1_700_000_000_000, Intensity: 3.21, PgaGal: 12.5, PgvCms: 0.8,
		}},
	}
}

func TestSealOpenVerify(t *testing.T) {
	t.Parallel()
	b, err := Seal(testKey, 3, intensityPacket())
	if err != nil {
		t.Fatal(err)
	}
	d, err := Open(b)
	if err != nil {
		t.Fatal(err)
	}
	if d.GetKeyId() != 3 || !Verify(testKey, d) {
		t.Fatalf("key id %d, verify %v", d.GetKeyId(), Verify(testKey, d))
	}
	if Verify(bytes.Repeat([]byte{1}, 32), d) {
		t.Fatal("verified with the wrong key")
	}
	p, err := Packet(d)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(p, intensityPacket()) {
		t.Fatalf("round trip changed the packet: %v", p)
	}
}

func TestOpenRejects(t *testing.T) {
	t.Parallel()
	good, _ := Seal(testKey, 1, intensityPacket())
	noMAC, _ := proto.Marshal(&stationv1.Datagram{Packet: []byte{1, 2}})
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"oversize", make([]byte, MaxDatagram+1), ErrOversize},
		{"garbage", []byte{0xff, 0xff, 0xff}, ErrMalformed},
		{"empty", nil, ErrMalformed},
		{"no mac", noMAC, ErrMalformed},
		{"truncated", good[:len(good)/2], ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Open(tt.b); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestAck(t *testing.T) {
	t.Parallel()
	ack := &stationv1.Ack{StationId: "S0001", Seq: 7, RecvAtMs: 5, Site: "TNN-1"}
	b, err := Seal(testKey, 1, ack)
	if err != nil {
		t.Fatal(err)
	}
	got, err := OpenAck(testKey, b)
	if err != nil || !proto.Equal(got, ack) {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := OpenAck(bytes.Repeat([]byte{9}, 32), b); !errors.Is(err, ErrBadMAC) {
		t.Fatalf("forged ack: err = %v", err)
	}
}

func TestPacketNeedsStation(t *testing.T) {
	t.Parallel()
	b, _ := Seal(testKey, 1, &stationv1.Packet{Seq: 1})
	d, err := Open(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Packet(d); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v", err)
	}
}

// FuzzOpen feeds arbitrary bytes through every decoding step a server and a
// station run on untrusted input.
func FuzzOpen(f *testing.F) {
	good, _ := Seal(testKey, 1, intensityPacket())
	ack, _ := Seal(testKey, 1, &stationv1.Ack{StationId: "S0001", Seq: 1})
	f.Add(good)
	f.Add(ack)
	f.Add(good[:10])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := Open(b); err == nil {
			Verify(testKey, d)
			if p, err := Packet(d); err == nil && p.GetStationId() == "" {
				t.Fatal("packet without station accepted")
			}
		}
		OpenAck(testKey, b)
	})
}

func TestSignerMatchesSeal(t *testing.T) {
	t.Parallel()
	s := NewSigner(testKey)
	a, err := s.Seal(4, intensityPacket())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Seal(testKey, 4, intensityPacket())
	if !bytes.Equal(a, b) {
		t.Fatal("Signer.Seal differs from Seal")
	}
	d, _ := Open(a)
	if !s.Verify(d) || NewSigner(bytes.Repeat([]byte{1}, 32)).Verify(d) {
		t.Fatal("verify")
	}
}

func BenchmarkVerify(b *testing.B) {
	d, _ := Open(must(Seal(testKey, 1, intensityPacket())))
	b.Run("hmac.New", func(b *testing.B) {
		for b.Loop() {
			Verify(testKey, d)
		}
	})
	b.Run("Signer", func(b *testing.B) {
		s := NewSigner(testKey)
		b.ReportAllocs()
		for b.Loop() {
			s.Verify(d)
		}
	})
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

package udpload

import (
	"context"
	"encoding/binary"
	"testing"
	"time"
)

func TestAgainstEcho(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := Echo(ctx, "127.0.0.1:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	next := func(conn int, i uint64) ([]byte, uint64) {
		id := uint64(conn)<<32 | i
		return binary.BigEndian.AppendUint64(nil, id), id
	}
	replyID := func(b []byte) (uint64, bool) {
		if len(b) != 8 {
			return 0, false
		}
		return binary.BigEndian.Uint64(b), true
	}
	for _, o := range []Options{
		{Conns: 2, Window: 8, Duration: 200 * time.Millisecond},
		{Conns: 2, Rate: 2000, Duration: 300 * time.Millisecond},
	} {
		o.Target, o.Next, o.ReplyID = addr.String(), next, replyID
		r, err := Run(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if r.Received == 0 || r.Received > r.Sent || r.P50 <= 0 || r.Max < r.P99 {
			t.Fatalf("result %v", r)
		}
		if o.Rate > 0 && (r.Sent < 300 || r.Sent > 900) {
			t.Fatalf("open loop at 2000/s for 0.3 s sent %d", r.Sent)
		}
	}
	if _, err := Run(ctx, Options{}); err == nil {
		t.Fatal("empty options accepted")
	}
}

package natsconn

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func TestUnreachableWithWait(t *testing.T) {
	t.Parallel()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	_, err := Connect(context.Background(), "nats://"+addr, "test", 300*time.Millisecond, nil)
	if err == nil || !strings.Contains(err.Error(), "not reachable within 300ms") {
		t.Fatalf("err = %v", err)
	}
	nc, err := Connect(context.Background(), "nats://"+addr, "test", 0, nil)
	if err != nil {
		t.Fatalf("background connect: %v", err)
	}
	nc.Close()
}

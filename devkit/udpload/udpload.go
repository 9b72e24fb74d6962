// Package udpload is a UDP load generator for benchmarks: it sends
// datagrams to a target from several sockets, matches replies to requests
// by an ID the caller extracts, and reports throughput and round-trip
// quantiles. Closed loop (a window of outstanding requests per socket)
// measures capacity; open loop (a fixed total rate) measures latency at a
// given load. The same run can target a bare echo server and svc-ingest,
// so results compare within one run on a shared machine.
package udpload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Options describe a run.
type Options struct {
	Target   string
	Conns    int           // sockets, each with its own sender and reader
	Window   int           // closed loop: requests outstanding per socket
	Rate     float64       // open loop: datagrams per second over all sockets (used when Window is 0)
	Duration time.Duration // how long to send
	// Next returns the i-th datagram of socket conn and the ID its reply
	// will carry.
	Next func(conn int, i uint64) (datagram []byte, id uint64)
	// ReplyID extracts the ID from a reply; false drops the reply.
	ReplyID func(reply []byte) (uint64, bool)
}

// Result of a run.
type Result struct {
	Sent, Received uint64
	Elapsed        time.Duration
	PerSecond      float64 // replies per second
	P50, P90, P99  time.Duration
	Max            time.Duration
}

func (r Result) String() string {
	return fmt.Sprintf("%d sent, %d replies in %s: %.0f/s, rtt p50 %s p90 %s p99 %s max %s",
		r.Sent, r.Received, r.Elapsed.Round(time.Millisecond), r.PerSecond, r.P50, r.P90, r.P99, r.Max)
}

type worker struct {
	conn     *net.UDPConn
	mu       sync.Mutex
	inflight map[uint64]time.Time
	rtts     []time.Duration
	credit   chan struct{}
}

// Run drives the target and returns when Duration has passed and the
// replies still in flight had a moment to arrive.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Conns <= 0 || o.Duration <= 0 || o.Next == nil || o.ReplyID == nil || (o.Window <= 0 && o.Rate <= 0) {
		return Result{}, errors.New("udpload: need Conns, Duration, Next, ReplyID, and Window or Rate")
	}
	addr, err := net.ResolveUDPAddr("udp", o.Target)
	if err != nil {
		return Result{}, err
	}
	workers := make([]*worker, o.Conns)
	for i := range workers {
		c, err := net.DialUDP("udp", nil, addr)
		if err != nil {
			return Result{}, err
		}
		defer c.Close()
		_ = c.SetReadBuffer(4 << 20)
		_ = c.SetWriteBuffer(4 << 20)
		w := &worker{conn: c, inflight: map[uint64]time.Time{}, credit: make(chan struct{}, max(o.Window, 1))}
		for range o.Window {
			w.credit <- struct{}{}
		}
		workers[i] = w
	}
	var sent, received atomic.Uint64
	runCtx, stop := context.WithTimeout(ctx, o.Duration)
	defer stop()
	start := time.Now()
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() { w.read(o.ReplyID, &received) })
		wg.Go(func() { w.send(runCtx, o, i, &sent) })
	}
	<-runCtx.Done()
	elapsed := time.Since(start)
	// Let replies in flight land, then stop the readers.
	time.Sleep(200 * time.Millisecond)
	for _, w := range workers {
		w.conn.SetReadDeadline(time.Now())
	}
	wg.Wait()

	var rtts []time.Duration
	for _, w := range workers {
		rtts = append(rtts, w.rtts...)
	}
	slices.Sort(rtts)
	r := Result{Sent: sent.Load(), Received: received.Load(), Elapsed: elapsed}
	r.PerSecond = float64(len(rtts)) / elapsed.Seconds()
	if n := len(rtts); n > 0 {
		r.P50, r.P90, r.P99, r.Max = rtts[n/2], rtts[n*90/100], rtts[n*99/100], rtts[n-1]
	}
	return r, nil
}

func (w *worker) send(ctx context.Context, o Options, conn int, sent *atomic.Uint64) {
	var interval time.Duration
	if o.Window <= 0 {
		interval = time.Duration(float64(time.Second) * float64(o.Conns) / o.Rate)
	}
	next := time.Now()
	for i := uint64(0); ; i++ {
		if o.Window > 0 {
			select {
			case <-w.credit:
			default:
				select {
				case <-w.credit:
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
					// Lost replies would starve the window: top it up.
				}
			}
		} else {
			next = next.Add(interval)
			if d := time.Until(next); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
		}
		if ctx.Err() != nil {
			return
		}
		d, id := o.Next(conn, i)
		w.mu.Lock()
		w.inflight[id] = time.Now()
		w.mu.Unlock()
		if _, err := w.conn.Write(d); err == nil {
			sent.Add(1)
		}
	}
}

func (w *worker) read(replyID func([]byte) (uint64, bool), received *atomic.Uint64) {
	buf := make([]byte, 2048)
	for {
		n, err := w.conn.Read(buf)
		if err != nil {
			var opErr *net.OpError
			if errors.As(err, &opErr) && !opErr.Timeout() {
				continue // ICMP refusals while the target starts
			}
			return
		}
		id, ok := replyID(buf[:n])
		if !ok {
			continue
		}
		now := time.Now()
		w.mu.Lock()
		at, ok := w.inflight[id]
		if ok {
			delete(w.inflight, id)
			w.rtts = append(w.rtts, now.Sub(at))
		}
		w.mu.Unlock()
		if ok {
			received.Add(1)
			select {
			case w.credit <- struct{}{}:
			default:
			}
		}
	}
}

// Echo serves a bare UDP echo on addr until ctx ends: the baseline a
// server's throughput is compared with.
func Echo(ctx context.Context, addr string, readers int) (net.Addr, error) {
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	if uc, ok := conn.(*net.UDPConn); ok {
		_ = uc.SetReadBuffer(8 << 20)
	}
	context.AfterFunc(ctx, func() { conn.Close() })
	for range max(readers, 1) {
		go func() {
			buf := make([]byte, 2048)
			for {
				n, from, err := conn.ReadFrom(buf)
				if err != nil {
					return
				}
				_, _ = conn.WriteTo(buf[:n], from) // an echo: a lost reply is the sender's loss to count
			}
		}()
	}
	return conn.LocalAddr(), nil
}

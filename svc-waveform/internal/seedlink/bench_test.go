package seedlink

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"shindo.dev/devkit/poll"
)

// BenchmarkFanout: 1,000 stations send a sensor and an intensity frame
// every 500 ms (the fleet's cadence); 1,000 SeedLink clients over TCP each
// select 30 streams (10 stations × BN?). Reported: the time from Publish
// (the record merged) to the client having read it, p50 and p99; the
// server's CPU per second of traffic (the whole process, the clients'
// reading included, so an upper bound); and heap per client. The clients
// run in the same process: on 2 cores they take CPU from the server.
//
//	go test -run '^$' -bench BenchmarkFanout -benchtime 1x ./internal/seedlink/
func BenchmarkFanout(b *testing.B) {
	const (
		stations = 1000
		clients  = 1000
		perCli   = 10
		seconds  = 20
	)
	s := startServer(b, func(o *Options) {
		o.MaxClients, o.MaxPerAddr, o.ClientBuffer = clients+10, clients+10, 4096
		o.WriteTimeout = 10 * time.Second
	})
	id := func(i int) string { return fmt.Sprintf("S%05d", i) }
	// Every station known to the ring before the clients come.
	now := time.Now().UnixMilli() / 500 * 500
	for i := range stations {
		s.Publish(Frame{Station: id(i), FirstMs: now, Values: [3]float32{1, 2, 3}})
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	var mu sync.Mutex
	var lats []time.Duration
	sent := sync.Map{} // "station start" → publish time
	var wg sync.WaitGroup
	conns := make([]net.Conn, 0, clients)
	for c := range clients {
		conn, err := net.Dial("tcp", s.addr)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, conn)
		r := bufio.NewReaderSize(conn, 4096)
		for k := range perCli {
			st := (c*perCli + k) % stations
			fmt.Fprintf(conn, "STATION %05d SH\r\nSELECT BN?\r\nDATA\r\n", st)
		}
		fmt.Fprintf(conn, "END\r\n")
		for range 3 * perCli {
			if _, err := r.ReadString('\n'); err != nil {
				b.Fatal(err)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 8+RecordLen)
			for {
				if _, err := io.ReadFull(r, buf); err != nil {
					return
				}
				// Station code and start time from the record's header.
				key := string(buf[8+8:8+13]) + " " + string(buf[8+20:8+30])
				if v, ok := sent.Load(key); ok {
					d := time.Since(v.(time.Time))
					mu.Lock()
					lats = append(lats, d)
					mu.Unlock()
				}
			}
		}()
	}
	poll.Until(b, 30*time.Second, "every client streaming", func() bool { return testutil.ToFloat64(s.m.streaming) >= clients })
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)

	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	start := time.Now()
	tick := time.NewTicker(500 * time.Millisecond)
	for n := range 2 * seconds {
		<-tick.C
		ms := now + 500*int64(n+1)
		for i := range stations {
			f := sensorFrameAt(ms, uint64(n))
			f.Station = id(i)
			var hdr [10]byte
			putBTime(hdr[:], time.UnixMilli(ms).UTC())
			sent.Store(fmt.Sprintf("%05d", i)+" "+string(hdr[:]), time.Now())
			s.Publish(f)
			s.Publish(Frame{Station: id(i), FirstMs: ms + 500, Values: [3]float32{1, 2, 3}})
		}
	}
	tick.Stop()
	elapsed := time.Since(start)
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	b.StopTimer()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	slices.Sort(lats)
	if len(lats) == 0 {
		b.Fatal("no record reached a client")
	}
	q := func(p float64) time.Duration { return lats[int(p*float64(len(lats)-1))] }
	b.ReportMetric(float64(q(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(q(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(len(lats))/elapsed.Seconds(), "records/s")
	b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "cpu-cores")
	b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/clients/1024, "heap-KiB/client")
	b.ReportMetric(float64(testDropped(s)), "dropped")
}

func testDropped(s *testServer) uint64 { return s.ring.Dropped() }

// putBTime writes the record header's start time (year, day, h, m, s,
// unused, 0.1 ms) as mseed does, to match records by their header bytes.
func putBTime(b []byte, t time.Time) {
	b[0], b[1] = byte(t.Year()>>8), byte(t.Year())
	b[2], b[3] = byte(t.YearDay()>>8), byte(t.YearDay())
	b[4], b[5], b[6], b[7] = byte(t.Hour()), byte(t.Minute()), byte(t.Second()), 0
	tenth := t.Nanosecond() / 100_000
	b[8], b[9] = byte(tenth>>8), byte(tenth)
}

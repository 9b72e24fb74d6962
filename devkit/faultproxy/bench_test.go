package faultproxy

import (
	"net"
	"testing"
	"time"
)

// BenchmarkUDPBurst sends bursts of 2,000 datagrams of 300 bytes — a fleet
// of 1,000 stations' two packets of a tick on one uplink — to an echo
// server, straight and through a proxy that impairs nothing, and waits for
// every echo: the proxy's cost in time per burst. Datagrams the kernel
// dropped in a full socket buffer are reported as lost/op.
func BenchmarkUDPBurst(b *testing.B) {
	const burst = 2000
	for _, via := range []string{"direct", "proxy"} {
		b.Run(via, func(b *testing.B) {
			echo, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				b.Fatal(err)
			}
			defer echo.Close()
			_ = echo.SetReadBuffer(socketBuffer)
			_ = echo.SetWriteBuffer(socketBuffer)
			go func() {
				buf := make([]byte, 2048)
				for {
					n, from, err := echo.ReadFromUDPAddrPort(buf)
					if err != nil {
						return
					}
					_, _ = echo.WriteToUDPAddrPort(buf[:n], from)
				}
			}()
			target := echo.LocalAddr().String()
			if via == "proxy" {
				p, err := ListenUDP("127.0.0.1:0", target, Options{MaxQueue: 2 * burst, KeepOrder: true})
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				target = p.Addr().String()
			}
			ta, err := net.ResolveUDPAddr("udp", target)
			if err != nil {
				b.Fatal(err)
			}
			c, err := net.DialUDP("udp", nil, ta)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			_ = c.SetReadBuffer(socketBuffer)
			_ = c.SetWriteBuffer(socketBuffer)
			msg := make([]byte, 300)
			buf := make([]byte, 2048)
			lost := 0
			for b.Loop() {
				for range burst {
					_, _ = c.Write(msg)
				}
				got := 0
				for ; got < burst; got++ {
					_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
					if _, err := c.Read(buf); err != nil {
						break // the rest were lost
					}
				}
				lost += burst - got
			}
			b.ReportMetric(float64(lost)/float64(b.N), "lost/op")
		})
	}
}

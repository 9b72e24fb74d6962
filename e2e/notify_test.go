package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// notification is one delivered notification as a client reads it.
type notification struct {
	ID     string          `json:"id"`
	Seq    uint64          `json:"seq"`
	Client string          `json:"client"`
	Data   json.RawMessage `json:"data"`
}

// notifyClient reads a client's notifications at one edge.
type notifyClient struct {
	t      *testing.T
	cancel context.CancelFunc
	events <-chan sseEvent
}

func connectNotify(t *testing.T, edge, client string) *notifyClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	return &notifyClient{t: t, cancel: cancel, events: openSSE(ctx, t, edge+"/v1/stream?topics=notify&client="+client)}
}

// next returns the next notification, or fails after 10 s.
func (c *notifyClient) next() notification {
	c.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				c.t.Fatal("notification stream ended")
			}
			if ev.name != "notify" {
				continue
			}
			if ev.id == "" {
				c.t.Fatalf("notification without an id: %+v", ev)
			}
			var n notification
			if err := json.Unmarshal([]byte(ev.data), &n); err != nil {
				c.t.Fatalf("notification %q: %v", ev.data, err)
			}
			return n
		case <-deadline:
			c.t.Fatal("no notification within 10s")
		}
	}
}

// none checks nothing more arrives for a while.
func (c *notifyClient) none(d time.Duration) {
	c.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-c.events:
			if ok && ev.name == "notify" {
				c.t.Fatalf("unexpected notification %s", ev.data)
			}
			if !ok {
				return
			}
		case <-deadline:
			return
		}
	}
}

func postJSON(t testing.TB, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// TestNotificationsAcrossEdges: an app server posts notifications for a
// client at either edge; the client gets each exactly once after acking,
// wherever it connects, also when the edge it was on dies mid-delivery.
func TestNotificationsAcrossEdges(t *testing.T) {
	d := startDev(t, "-stations", "1", "-simulate=false")
	tpe := d.endpoints.get(t, "TPE-1", "edge", "http")
	khh := d.endpoints.get(t, "KHH-1", "edge", "http")
	raw, err := os.ReadFile(filepath.Join(d.dir, "notify-token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(raw))
	const client = "e2e-client-0123456789"
	post := func(edge string, n int) {
		t.Helper()
		body := fmt.Sprintf(`{"client":%q,"id":"n%d","data":{"n":%d}}`, client, n, n)
		if code, resp := postJSON(t, edge+"/v1/notify", token, body); code != http.StatusAccepted {
			t.Fatalf("post %d at %s: %d %s", n, edge, code, resp)
		}
	}
	ack := func(edge string, seq uint64) {
		t.Helper()
		if code, resp := postJSON(t, edge+"/v1/notify/ack", "", fmt.Sprintf(`{"client":%q,"seq":%d}`, client, seq)); code != http.StatusOK {
			t.Fatalf("ack %d at %s: %d %s", seq, edge, code, resp)
		}
	}
	expect := func(c *notifyClient, ns ...int) []notification {
		t.Helper()
		var out []notification
		for _, want := range ns {
			n := c.next()
			var data struct{ N int }
			json.Unmarshal(n.Data, &data)
			if n.Client != client || data.N != want || n.ID != fmt.Sprintf("n%d", want) {
				t.Fatalf("got notification %+v (data %s), want n%d", n, n.Data, want)
			}
			out = append(out, n)
		}
		return out
	}

	// Unauthenticated and malformed posts are refused.
	if code, _ := postJSON(t, tpe+"/v1/notify", "wrong-token-0123456789", `{"client":"e2e-client-0123456789","data":1}`); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", code)
	}
	if code, _ := postJSON(t, tpe+"/v1/notify", token, `{"client":"short","data":1}`); code != http.StatusBadRequest {
		t.Fatalf("bad client: %d", code)
	}

	// Connected at TPE-1: 1–3 arrive; acked.
	c := connectNotify(t, tpe, client)
	post(tpe, 1)
	post(khh, 2)
	post(tpe, 3)
	ns := expect(c, 1, 2, 3)
	ack(tpe, ns[2].Seq)
	c.cancel()

	// Away: 4–6 are posted at both edges; back at KHH-1 they arrive, and
	// none of the acked ones.
	post(tpe, 4)
	post(khh, 5)
	post(tpe, 6)
	c = connectNotify(t, khh, client)
	ns = expect(c, 4, 5, 6)
	ack(khh, ns[2].Seq)
	c.none(300 * time.Millisecond)

	// Mid-delivery at KHH-1: 7 acked, 8 delivered but not acked, then the
	// edge dies. At TPE-1 the client gets 8 again (unacked), never 7.
	post(tpe, 7)
	post(tpe, 8)
	ns = expect(c, 7, 8)
	ack(tpe, ns[0].Seq)
	fault(t, d, "kill", "KHH-1-edge")
	c.cancel()
	c = connectNotify(t, tpe, client)
	ns = expect(c, 8)
	post(tpe, 9)
	ns = append(ns, expect(c, 9)...)
	ack(tpe, ns[1].Seq)
	c.none(300 * time.Millisecond)
	c.cancel()

	// Acks only move forward.
	if code, _ := postJSON(t, tpe+"/v1/notify/ack", "", fmt.Sprintf(`{"client":%q,"seq":1}`, client)); code != http.StatusConflict {
		t.Errorf("ack going back: %d, want 409", code)
	}
}

package chaoscmd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"shindo.dev/sdk/sse"
)

// notifier is an app server and one of its clients: it posts a
// notification every interval at alternating edges (retrying a refused
// post with the same ID, which the edges store once), while the client
// follows its notifications by the client rules and acknowledges each.
// SPEC §6: every notification accepted is delivered, exactly once — a
// notification is never delivered again once its ack was accepted.
type notifier struct {
	topo   *topology
	client string
	every  time.Duration
	http   *http.Client

	mu        sync.Mutex
	accepted  map[string]time.Time // ID → when the post was accepted
	delivered map[string]int       // ID → deliveries
	seqOf     map[string]uint64
	ackedSeq  uint64 // highest seq whose ack an edge accepted
	// violations found as notifications arrive: one delivered again
	// after its ack.
	violations  []string
	redelivered []string // delivered again before its ack took: allowed
	postFails   int
}

func newNotifier(topo *topology, every time.Duration) *notifier {
	b := make([]byte, 8)
	rand.Read(b)
	return &notifier{topo: topo, client: "chaos-client-" + hex.EncodeToString(b), every: every,
		http:     topo.client(5*time.Second, 0),
		accepted: map[string]time.Time{}, delivered: map[string]int{}, seqOf: map[string]uint64{}}
}

// run posts until ctx ends and reads until readCtx ends (later, so the
// last notifications can arrive).
func (n *notifier) run(ctx, readCtx context.Context) {
	events := make(chan sse.Event, 64)
	edges := n.topo.edges()
	// Stream ends with readCtx; its error is only that.
	go func() {
		_ = sse.Stream(readCtx, sse.Options{Entrances: edges, Path: "/v1/stream?topics=notify&client=" + n.client,
			HTTP: n.topo.client(0, 3*time.Second)}, events)
	}()
	go func() {
		for ev := range events {
			if ev.Name == "notify" {
				n.take(readCtx, ev)
			}
		}
	}()
	go func() {
		tick := time.NewTicker(n.every)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			id := fmt.Sprintf("c%05d", i)
			body := fmt.Sprintf(`{"client":%q,"id":%q,"data":{"n":%d}}`, n.client, id, i)
			// Retried, with the same ID, at the other edge and again, until
			// accepted or the run ends.
			for try := 0; ctx.Err() == nil; try++ {
				code, err := n.post(ctx, edges[(i+try)%len(edges)]+"/v1/notify", n.topo.notifyToken, body)
				if err == nil && code == http.StatusAccepted {
					n.mu.Lock()
					n.accepted[id] = time.Now()
					n.mu.Unlock()
					break
				}
				n.mu.Lock()
				n.postFails++
				n.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(500 * time.Millisecond):
				}
			}
		}
	}()
}

func (n *notifier) post(ctx context.Context, url, token, body string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := n.http.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// take records a delivery and acknowledges it at the edge it came from,
// or the other.
func (n *notifier) take(ctx context.Context, ev sse.Event) {
	var msg struct {
		ID  string `json:"id"`
		Seq uint64 `json:"seq"`
	}
	if err := json.Unmarshal([]byte(ev.Data), &msg); err != nil {
		n.mu.Lock()
		n.violations = append(n.violations, fmt.Sprintf("notification %q is not JSON: %v", ev.Data, err))
		n.mu.Unlock()
		return
	}
	n.mu.Lock()
	n.delivered[msg.ID]++
	if prev, ok := n.seqOf[msg.ID]; ok && prev != msg.Seq {
		n.violations = append(n.violations, fmt.Sprintf("notification %s delivered as seq %d and as seq %d: stored twice", msg.ID, prev, msg.Seq))
	}
	n.seqOf[msg.ID] = msg.Seq
	if n.delivered[msg.ID] > 1 {
		if msg.Seq <= n.ackedSeq {
			n.violations = append(n.violations, fmt.Sprintf("notification %s (seq %d) delivered again at %s after its ack (acked up to %d)", msg.ID, msg.Seq, ev.Entry, n.ackedSeq))
		} else {
			n.redelivered = append(n.redelivered, msg.ID)
		}
	}
	n.mu.Unlock()
	body := fmt.Sprintf(`{"client":%q,"seq":%d}`, n.client, msg.Seq)
	for _, edge := range append([]string{ev.Entry}, n.topo.edges()...) {
		if code, err := n.post(ctx, edge+"/v1/notify/ack", "", body); err == nil && code == http.StatusOK {
			n.mu.Lock()
			n.ackedSeq = max(n.ackedSeq, msg.Seq)
			n.mu.Unlock()
			return
		}
	}
}

// waitDelivered waits until every accepted notification was delivered or
// ctx ends.
func (n *notifier) waitDelivered(ctx context.Context) {
	for ctx.Err() == nil {
		if len(n.undelivered()) == 0 {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (n *notifier) undelivered() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for id := range n.accepted {
		if n.delivered[id] == 0 {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (n *notifier) findings() (accepted, redelivered, postFails int, violations []string) {
	missing := n.undelivered()
	n.mu.Lock()
	defer n.mu.Unlock()
	violations = append(violations, n.violations...)
	if len(missing) > 0 {
		var evidence []string
		for _, id := range missing {
			evidence = append(evidence, fmt.Sprintf("%s (accepted %s)", id, n.accepted[id].Format(time.TimeOnly)))
		}
		violations = append(violations, fmt.Sprintf("%d accepted notifications never delivered: %v", len(missing), first(evidence, 10)))
	}
	if len(n.accepted) == 0 {
		violations = append(violations, "no notification was accepted in the whole run")
	}
	return len(n.accepted), len(n.redelivered), n.postFails, violations
}

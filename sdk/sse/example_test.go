package sse_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"shindo.dev/sdk/sse"
)

// Read a stream's events; on a drop the stream reconnects with
// Last-Event-ID, and moves to the next entrance after three failed tries.
func ExampleStream() {
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "retry: 3000\n\nevent: info\ndata: {\"location\":\"TPE-1\"}\n\nid: 1\ndata: {\"time\":1}\n\n")
	}))
	defer edge.Close()

	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan sse.Event)
	go sse.Stream(ctx, sse.Options{Entrances: []string{edge.URL}, Path: "/api/v2/trem/rts?sse=1"}, events)
	info := <-events
	tick := <-events
	cancel()
	fmt.Println(info.Name, info.Data)
	fmt.Println(tick.ID, tick.Data)
	// Output:
	// info {"location":"TPE-1"}
	// 1 {"time":1}
}

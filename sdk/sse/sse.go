// Package sse is the Server-Sent Events client of a shindo network,
// following the client rules of SPEC §7: on a drop it waits the server's
// `retry` (3 s unless told otherwise) and reconnects to the same entrance
// with Last-Event-ID; after three consecutive failed reconnects it switches
// entrance (TPE-1 ↔ KHH-1, or whatever list it was given).
package sse

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Event is one server-sent event.
type Event struct {
	ID    string
	Name  string // "" for the default "message"
	Data  string
	Entry string // the entrance it came from
}

// Options configure a Stream.
type Options struct {
	// Entrances are base URLs (e.g. http://tpe-1:8080, http://khh-1:8080).
	Entrances []string
	// Path is the stream's path and query, e.g. /v1/stream?topics=rts.
	Path string
	// Retry is the reconnect delay until the server sends its own.
	Retry time.Duration
	// FailuresToSwitch is how many consecutive failed reconnects move to
	// the next entrance (3).
	FailuresToSwitch int
	// HTTP is the client; it must not time out whole requests.
	HTTP *http.Client
	// OnState, if set, learns of connects, drops and switches.
	OnState func(State)
}

// State reports the stream's connection.
type State struct {
	Entrance  string
	Connected bool
	Failures  int   // consecutive failed reconnects
	Err       error // why the last attempt failed or the stream dropped
	Switched  bool  // this entrance was just switched to
}

// Stream reads events until ctx ends, reconnecting by the rules, and sends
// them to events (which it closes when done).
func Stream(ctx context.Context, opts Options, events chan<- Event) error {
	defer close(events)
	if len(opts.Entrances) == 0 {
		return errors.New("sse: no entrance")
	}
	if opts.Retry <= 0 {
		opts.Retry = 3 * time.Second
	}
	if opts.FailuresToSwitch <= 0 {
		opts.FailuresToSwitch = 3
	}
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{}
	}
	state := func(s State) {
		if opts.OnState != nil {
			opts.OnState(s)
		}
	}
	entrance, failures := 0, 0
	lastID := ""
	retry := opts.Retry
	switched := false
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(retry):
			}
		}
		base := opts.Entrances[entrance]
		got, newRetry, err := connect(ctx, opts, base, lastID, events, func() {
			failures = 0
			state(State{Entrance: base, Connected: true, Switched: switched})
			switched = false
		}, &lastID)
		if newRetry > 0 {
			retry = newRetry
		}
		if ctx.Err() != nil {
			return nil
		}
		if got {
			// It was connected: the drop starts a fresh count.
			state(State{Entrance: base, Err: err})
			continue
		}
		failures++
		state(State{Entrance: base, Failures: failures, Err: err})
		if failures >= opts.FailuresToSwitch {
			entrance = (entrance + 1) % len(opts.Entrances)
			failures = 0
			switched = true
		}
	}
}

// connect runs one connection; connected tells whether the server answered
// with a stream (so this was not a failed attempt).
func connect(ctx context.Context, opts Options, base, lastID string, events chan<- Event, onOpen func(), id *string) (connected bool, retry time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+opts.Path, nil)
	if err != nil {
		return false, 0, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := opts.HTTP.Do(req)
	if err != nil {
		return false, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return false, 0, fmt.Errorf("sse: %s: %s", base, resp.Status)
	}
	onOpen()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxEvent)
	var p parser
	for sc.Scan() {
		ev, ok, err := p.line(sc.Text())
		if err != nil {
			return true, p.retry, fmt.Errorf("sse: %s: %w", base, err)
		}
		if !ok {
			continue
		}
		ev.Entry = base
		if ev.ID != "" {
			*id = ev.ID
		}
		select {
		case events <- ev:
		case <-ctx.Done():
			return true, p.retry, ctx.Err()
		}
	}
	retry = p.retry
	if err := sc.Err(); err != nil {
		return true, retry, err
	}
	return true, retry, io.EOF
}

// Bounds on what a server may send: a client must not be made to hold an
// event without end, nor to wait for days before reconnecting.
const (
	maxEvent = 16 << 20 // bytes of one event's data, or of one line
	maxRetry = 5 * time.Minute
)

var errEventTooLarge = errors.New("an event's data is over 16 MiB")

// parser interprets an event stream's lines as the HTML standard's
// EventSource does: fields build an event, a blank line dispatches it,
// lines starting with a colon are comments.
type parser struct {
	ev    Event
	data  []string
	size  int
	retry time.Duration // the last retry: field, within maxRetry; 0: none
}

// line takes one line (without its end) and returns the event it
// dispatches, if any.
func (p *parser) line(line string) (Event, bool, error) {
	if line == "" {
		ev, ok := p.ev, len(p.data) > 0 || p.ev.Name != ""
		ev.Data = strings.Join(p.data, "\n")
		p.ev, p.data, p.size = Event{}, nil, 0
		return ev, ok, nil
	}
	if strings.HasPrefix(line, ":") {
		return Event{}, false, nil // comment: keep-alive
	}
	field, value, _ := strings.Cut(line, ":")
	value = strings.TrimPrefix(value, " ")
	switch field {
	case "event":
		p.ev.Name = value
	case "data":
		if p.size += len(value) + 1; p.size > maxEvent {
			return Event{}, false, errEventTooLarge
		}
		p.data = append(p.data, value)
	case "id":
		if !strings.ContainsRune(value, 0) {
			p.ev.ID = value
		}
	case "retry":
		if ms, err := strconv.ParseInt(value, 10, 64); err == nil && ms > 0 {
			p.retry = min(time.Duration(min(ms, int64(maxRetry/time.Millisecond)))*time.Millisecond, maxRetry)
		}
	}
	return Event{}, false, nil
}

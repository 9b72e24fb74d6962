package notify

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	natsbusv1 "shindo.dev/gen/shindo/natsbus/v1"
)

// subscriptionBuffer is how many fetched notifications wait for the SSE
// writer; the rest wait in etcd and on the cores.
const subscriptionBuffer = 16

// Reasons a subscription ends, for logs.
var (
	errMoved       = errors.New("another subscription took the client over")
	errSessionLost = errors.New("this edge's etcd lease ended")
	errClosing     = errors.New("service closing")
)

// Subscribe makes this edge the owner of client's delivery — taking it
// over at once from any previous owner, here or at another edge — and
// returns the client's unacknowledged notifications in sequence order,
// then new ones as they are committed. The channel closes when ctx ends,
// when another subscription takes the client over (the client connected
// again, here or elsewhere), or when this edge loses its etcd lease; the
// caller should then end the client's stream so that it reconnects.
//
// Notifications not yet acknowledged are delivered again by the next
// subscription; acknowledged ones never are. A client may therefore see
// a sequence number again after a reconnect and should ignore those it
// has already processed.
func (s *Service) Subscribe(ctx context.Context, client string) (<-chan Notification, error) {
	if !ValidClient(client) {
		return nil, ErrBadClient
	}
	sess := s.session()
	if sess == nil || s.ctx.Err() != nil {
		return nil, fmt.Errorf("%w: no etcd lease at this edge", ErrUnavailable)
	}
	token := s.cfg.Site + "/" + rand.Text()
	mine, _ := json.Marshal(owner{Edge: s.cfg.Site, Sub: token, Since: time.Now().UnixMilli()})

	var resp *clientv3.TxnResponse
	var prev owner
	var hadPrev bool
	for attempt := 0; ; attempt++ {
		if attempt == commitAttempts {
			return nil, fmt.Errorf("%w: client %s is being taken over elsewhere at the same time; retry", ErrUnavailable, client)
		}
		ectx, cancel := s.etcdCtx(ctx)
		cur, err := s.cli.Get(ectx, ownerKey(client))
		if err != nil {
			cancel()
			return nil, fmt.Errorf("%w: etcd: %v", ErrUnavailable, err)
		}
		var rev int64
		hadPrev = len(cur.Kvs) > 0
		if hadPrev {
			rev, prev = cur.Kvs[0].ModRevision, parseOwner(cur.Kvs[0].Value)
		}
		// Compare-and-swap on the current revision: whoever owned the
		// client, alive or dead, loses it now; no waiting for its lease.
		resp, err = s.cli.Txn(ectx).
			If(clientv3.Compare(clientv3.ModRevision(ownerKey(client)), "=", rev)).
			Then(
				clientv3.OpPut(ownerKey(client), string(mine), clientv3.WithLease(sess.Lease())),
				clientv3.OpGet(ackedKey(client)),
				clientv3.OpGet(entryPrefix(client), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)),
			).Commit()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%w: etcd: %v", ErrUnavailable, err)
		}
		if resp.Succeeded {
			break
		}
	}
	switch {
	case !hadPrev:
		s.m.takeovers.WithLabelValues("none").Inc()
	case prev.Edge == s.cfg.Site:
		s.m.takeovers.WithLabelValues("this_edge").Inc()
	default:
		s.m.takeovers.WithLabelValues("other_edge").Inc()
		s.log.InfoContext(ctx, "client moved here", slog.String("client", client), slog.String("from", prev.Edge))
	}

	sub := &subscription{s: s, client: client, token: token, rev: resp.Header.Revision,
		out: make(chan Notification, subscriptionBuffer)}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		sub.acked = parseCounter(kvs[0].Value)
	}
	for _, kv := range resp.Responses[2].GetResponseRange().Kvs {
		sub.add(kv)
	}

	sctx, cancel := context.WithCancelCause(ctx)
	stopSess := context.AfterFunc(sess.Ctx(), func() { cancel(errSessionLost) })
	stopSvc := context.AfterFunc(s.ctx, func() { cancel(errClosing) })
	// From the revision of the takeover on: nothing committed or
	// acknowledged in between is missed.
	watch := s.cli.Watch(clientv3.WithRequireLeader(sctx), clientPrefix(client), clientv3.WithPrefix(), clientv3.WithRev(sub.rev+1))
	s.m.subs.Inc()
	s.subs.Add(1)
	go func() {
		defer s.subs.Done()
		defer s.m.subs.Dec()
		defer stopSess()
		defer stopSvc()
		err := sub.run(sctx, watch)
		cancel(err)
		s.release(sub, sess, context.Cause(sctx))
	}()
	return sub.out, nil
}

// release deletes the ownership key if it is still this subscription's,
// so that no key names a subscription that is gone.
func (s *Service) release(sub *subscription, sess *concurrency.Session, why error) {
	s.mu.Lock()
	killed := s.killed
	s.mu.Unlock()
	switch {
	case errors.Is(why, errMoved):
		s.m.lost.Inc()
		s.log.Info("client taken over by another subscription", slog.String("client", sub.client))
		return
	case killed || errors.Is(why, errSessionLost):
		return
	case why != nil && !errors.Is(why, context.Canceled) && !errors.Is(why, errClosing):
		s.log.Warn("notification subscription ended", slog.String("client", sub.client), slog.Any("error", why))
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.EtcdTimeout)
	defer cancel()
	_, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(ownerKey(sub.client)), "=", sub.rev)).
		Then(clientv3.OpDelete(ownerKey(sub.client))).Commit()
	if err != nil {
		// It expires with the lease.
		s.log.DebugContext(ctx, "ownership not released", slog.String("client", sub.client), slog.Int64("lease", int64(sess.Lease())), slog.Any("error", err))
	}
}

// subscription delivers one client's notifications in sequence order.
type subscription struct {
	s      *Service
	client string
	token  string
	rev    int64 // revision of the takeover: the ownership key's ModRevision
	out    chan Notification

	acked uint64
	queue []queued // committed, not yet delivered, in sequence order
	last  uint64   // highest sequence number queued so far
}

type queued struct {
	seq uint64
	e   entry
}

type fetched struct {
	seq   uint64
	n     Notification
	found bool
}

// add queues a committed entry, or updates a queued one (a repair added a
// location).
func (sub *subscription) add(kv *mvccpb.KeyValue) {
	seq, ok := seqAfter(string(kv.Key), entryPrefix(sub.client))
	if !ok {
		return
	}
	e, err := parseEntry(kv.Value)
	if err != nil {
		sub.s.log.Warn("bad notification entry skipped", slog.String("client", sub.client), slog.Uint64("seq", seq), slog.Any("error", err))
		return
	}
	if seq > sub.last {
		sub.queue = append(sub.queue, queued{seq, e})
		sub.last = seq
		return
	}
	for i := range sub.queue {
		if sub.queue[i].seq == seq {
			sub.queue[i].e = e
		}
	}
}

// run is the subscription's loop: it follows the client's keys in etcd,
// fetches each notification's payload from a core, and hands them out in
// order, skipping what the client has acknowledged meanwhile.
func (sub *subscription) run(ctx context.Context, watch clientv3.WatchChan) error {
	defer close(sub.out)
	results := make(chan fetched, 1)
	fetching := false
	var ready Notification // delivered next, when hasReady
	hasReady := false
	for {
		for len(sub.queue) > 0 && sub.queue[0].seq <= sub.acked {
			sub.queue = sub.queue[1:]
		}
		if hasReady && ready.Seq <= sub.acked {
			hasReady = false
		}
		if !hasReady && !fetching && len(sub.queue) > 0 {
			fetching = true
			q := sub.queue[0]
			go func() { results <- sub.s.fetch(ctx, sub.client, q.seq, q.e) }()
		}
		var send chan<- Notification
		if hasReady {
			send = sub.out
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case wr, ok := <-watch:
			if !ok {
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				return errors.New("etcd watch closed")
			}
			if err := wr.Err(); err != nil {
				return fmt.Errorf("etcd watch: %w", err)
			}
			if err := sub.apply(wr.Events); err != nil {
				return err
			}
		case r := <-results:
			fetching = false
			if len(sub.queue) == 0 || sub.queue[0].seq != r.seq {
				break // acknowledged while it was fetched
			}
			sub.queue = sub.queue[1:]
			if r.found {
				ready, hasReady = r.n, true
			}
		case send <- ready:
			sub.s.m.delivered.Inc()
			hasReady = false
		}
	}
}

// apply follows the changes of the client's keys.
func (sub *subscription) apply(events []*clientv3.Event) error {
	for _, ev := range events {
		key := string(ev.Kv.Key)
		switch {
		case key == ownerKey(sub.client):
			if ev.Type == clientv3.EventTypeDelete || parseOwner(ev.Kv.Value).Sub != sub.token {
				return errMoved
			}
		case key == ackedKey(sub.client):
			if ev.Type == clientv3.EventTypePut {
				sub.acked = max(sub.acked, parseCounter(ev.Kv.Value))
			}
		case ev.Type == clientv3.EventTypePut:
			sub.add(ev.Kv)
		}
	}
	return nil
}

// fetch reads a committed notification's payload from a core that holds
// it. While a holder cannot be asked (down, or not yet reached) it tries
// again, for a committed notification must not be skipped; only when every
// holder answers without it is it skipped as missing.
func (s *Service) fetch(ctx context.Context, client string, seq uint64, e entry) fetched {
	if posted := time.UnixMilli(e.Posted); time.Since(posted) > s.cfg.Retention {
		// Kept past the retention by etcd (a lease outlives its TTL
		// across a leader change); its payload has expired.
		s.log.InfoContext(ctx, "expired notification skipped", slog.String("client", client), slog.Uint64("seq", seq), slog.Time("posted", posted))
		return fetched{seq: seq}
	}
	wait := 50 * time.Millisecond
	for {
		p, err := s.tryFetch(ctx, client, e)
		if err == nil {
			return fetched{seq: seq, found: true, n: Notification{
				Client: client, Seq: seq, ID: e.ID, PostedAt: time.UnixMilli(e.Posted), Data: p.GetData()}}
		}
		if errors.Is(err, errNotHere) {
			s.m.missing.Inc()
			s.log.ErrorContext(ctx, "notification payload on no core; skipped", slog.String("client", client), slog.Uint64("seq", seq),
				slog.String("id", e.ID), slog.Any("stored_at", e.At))
			return fetched{seq: seq}
		}
		s.log.DebugContext(ctx, "notification payload not reachable yet", slog.String("client", client), slog.Uint64("seq", seq), slog.Any("error", err))
		select {
		case <-ctx.Done():
			return fetched{seq: seq}
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
		// The repair loop may have copied it to a core that is up.
		ectx, cancel := s.etcdCtx(ctx)
		resp, err := s.cli.Get(ectx, entryKey(client, seq))
		cancel()
		if err == nil && len(resp.Kvs) == 0 {
			return fetched{seq: seq} // acknowledged meanwhile
		}
		if err == nil {
			if fresh, err := parseEntry(resp.Kvs[0].Value); err == nil && fresh.ID == e.ID {
				e = fresh
			}
		}
	}
}

// tryFetch asks the holders in the configured order of the cores; it
// returns errNotHere when each of them answered without the payload. A
// copy that does not decode is counted, logged and taken as not there.
func (s *Service) tryFetch(ctx context.Context, client string, e entry) (*natsbusv1.NotificationPayload, error) {
	var lastErr error
	for _, c := range s.cores {
		at, ok := e.At[c.known()]
		if !ok {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
		st, err := c.ready(cctx, s.stream, s.claim)
		if err == nil {
			var p *natsbusv1.NotificationPayload
			p, err = c.get(cctx, st, client, e.ID, at)
			if err == nil {
				cancel()
				return p, nil
			}
			if errors.Is(err, errUndecodable) {
				s.m.undecodable.Inc()
				s.log.Warn("notification payload undecodable; taken as missing on that core", slog.String("client", client),
					slog.String("id", e.ID), slog.Any("error", err))
				err = errNotHere
			}
		}
		cancel()
		if !errors.Is(err, errNotHere) {
			lastErr = err
		}
	}
	if lastErr != nil {
		return nil, lastErr
	}
	for name := range e.At {
		if s.coreByName(name) == nil && !s.allKnown() {
			return nil, fmt.Errorf("core %s not reached yet", name)
		}
	}
	return nil, errNotHere
}

package notify

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	natsbusv1 "shindo.dev/gen/shindo/natsbus/v1"
)

// commitAttempts bounds the compare-and-swap retries of one post or ack;
// each retry means another post for the same client committed first.
const commitAttempts = 64

// Receipt is the answer to an accepted post.
type Receipt struct {
	ID  string `json:"id"`
	Seq uint64 `json:"seq"`
	// Duplicate is set when the post repeated an ID already committed: it
	// was not stored again.
	Duplicate bool `json:"duplicate,omitempty"`
}

// clientState is what a post or an ack reads of a client in etcd.
type clientState struct {
	head, acked, last uint64 // last: highest committed entry still kept
	headRev, ackedRev int64
	dup               uint64 // seq of the poster-chosen ID, if committed
	dupFound          bool
}

// top is the highest sequence number the client has had.
func (st clientState) top() uint64 { return max(st.head, st.acked, st.last) }

func (s *Service) readClient(ctx context.Context, client, id string) (clientState, error) {
	ops := []clientv3.Op{
		clientv3.OpGet(headKey(client)),
		clientv3.OpGet(ackedKey(client)),
		clientv3.OpGet(entryPrefix(client), append(clientv3.WithLastKey(), clientv3.WithKeysOnly())...),
	}
	if id != "" {
		ops = append(ops, clientv3.OpGet(idKey(client, id)))
	}
	ctx, cancel := s.etcdCtx(ctx)
	defer cancel()
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return clientState{}, err
	}
	var st clientState
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		st.head, st.headRev = parseCounter(kvs[0].Value), kvs[0].ModRevision
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		st.acked, st.ackedRev = parseCounter(kvs[0].Value), kvs[0].ModRevision
	}
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) > 0 {
		st.last, _ = seqAfter(string(kvs[0].Key), entryPrefix(client))
	}
	if id != "" {
		if kvs := resp.Responses[3].GetResponseRange().Kvs; len(kvs) > 0 {
			st.dup, st.dupFound = parseCounter(kvs[0].Value), true
		}
	}
	return st, nil
}

// Post stores a notification for client and commits it in the client's
// order. data must be compact JSON (ParsePost makes it so); id is the
// poster's name for it, or "" to have one made.
//
// The payload is first stored on every reachable core, then given the
// next sequence number by a compare-and-swap in etcd that also records
// where it is stored. Only committed notifications are delivered, so
// sequence numbers have no gaps, and none is committed below one a client
// may already have acknowledged.
func (s *Service) Post(ctx context.Context, client, id string, data json.RawMessage) (Receipt, error) {
	start := time.Now()
	rec, err := s.post(ctx, client, id, data)
	switch {
	case err == nil && rec.Duplicate:
		s.m.posts.WithLabelValues(resultDuplicate).Inc()
	case err == nil:
		s.m.posts.WithLabelValues(resultAccepted).Inc()
		s.m.postSeconds.Observe(time.Since(start).Seconds())
	case errors.Is(err, ErrTooManyPending):
		s.m.posts.WithLabelValues(resultTooMany).Inc()
	case errors.Is(err, ErrUnavailable):
		s.m.posts.WithLabelValues(resultUnavailable).Inc()
	default:
		s.m.posts.WithLabelValues(resultInvalid).Inc()
	}
	return rec, err
}

func (s *Service) post(ctx context.Context, client, id string, data json.RawMessage) (Receipt, error) {
	if !ValidClient(client) {
		return Receipt{}, ErrBadClient
	}
	if id != "" && !validID(id) {
		return Receipt{}, fmt.Errorf("id %q: want 1 to %d characters of A-Z a-z 0-9 . _ -", truncate(id), maxIDLen)
	}
	// Compact: the data goes out on one SSE data line.
	var compact bytes.Buffer
	if len(data) == 0 || !utf8.Valid(data) || json.Compact(&compact, data) != nil || compact.Len() > s.cfg.MaxData {
		return Receipt{}, fmt.Errorf("data: want at most %d bytes of JSON in UTF-8", s.cfg.MaxData)
	}
	data = compact.Bytes()
	chosen := id != ""
	if !chosen {
		id = rand.Text()
	}
	st, err := s.readClient(ctx, client, idIf(chosen, id))
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: etcd: %v", ErrUnavailable, err)
	}
	if st.dupFound {
		return Receipt{ID: id, Seq: st.dup, Duplicate: true}, nil
	}
	if err := s.checkPending(client, st); err != nil {
		return Receipt{}, err
	}
	now := time.Now()
	at := s.store(ctx, client, &natsbusv1.NotificationPayload{Id: id, Client: client, TimeMs: now.UnixMilli(), Data: data})
	if len(at) == 0 {
		return Receipt{}, fmt.Errorf("%w: no core stored the notification (are the cores' NATS servers reachable?)", ErrUnavailable)
	}
	e := entry{ID: id, Posted: now.UnixMilli(), At: at}
	for range commitAttempts {
		seq, ok, err := s.commit(ctx, client, idIf(chosen, id), st, e)
		if err != nil {
			// The payload stays on the cores until it expires; a retry
			// with the same id stores it once.
			return Receipt{}, fmt.Errorf("%w: etcd: %v", ErrUnavailable, err)
		}
		if ok {
			return Receipt{ID: id, Seq: seq}, nil
		}
		if st, err = s.readClient(ctx, client, idIf(chosen, id)); err != nil {
			return Receipt{}, fmt.Errorf("%w: etcd: %v", ErrUnavailable, err)
		}
		if st.dupFound {
			return Receipt{ID: id, Seq: st.dup, Duplicate: true}, nil
		}
		if err := s.checkPending(client, st); err != nil {
			return Receipt{}, err
		}
	}
	return Receipt{}, fmt.Errorf("%w: too many concurrent posts for client %s; retry", ErrUnavailable, client)
}

func idIf(chosen bool, id string) string {
	if chosen {
		return id
	}
	return ""
}

func (s *Service) checkPending(client string, st clientState) error {
	if pending := st.top() - st.acked; pending >= uint64(s.cfg.MaxPending) {
		return fmt.Errorf("%w: client %s has %d; it must connect and acknowledge before more are accepted", ErrTooManyPending, client, pending)
	}
	return nil
}

// commit gives the stored notification the next sequence number, if no
// other commit for the client came in since st was read.
func (s *Service) commit(ctx context.Context, client, chosenID string, st clientState, e entry) (uint64, bool, error) {
	seq := st.top() + 1
	for range 2 { // a second time after an unknown lease
		ctx, cancel := s.etcdCtx(ctx)
		lease, err := s.retention.get(ctx, s.cli)
		if err != nil {
			cancel()
			return 0, false, err
		}
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.ModRevision(headKey(client)), "=", st.headRev),
			clientv3.Compare(clientv3.CreateRevision(entryKey(client, seq)), "=", 0),
		}
		ops := []clientv3.Op{
			clientv3.OpPut(headKey(client), strconv.FormatUint(seq, 10), clientv3.WithLease(lease)),
			clientv3.OpPut(entryKey(client, seq), e.marshal(), clientv3.WithLease(lease)),
		}
		var dedupLease clientv3.LeaseID
		if chosenID != "" {
			if dedupLease, err = s.dedup.get(ctx, s.cli); err != nil {
				cancel()
				return 0, false, err
			}
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(idKey(client, chosenID)), "=", 0))
			ops = append(ops, clientv3.OpPut(idKey(client, chosenID), strconv.FormatUint(seq, 10), clientv3.WithLease(dedupLease)))
		}
		if len(e.At) < len(s.cores) {
			ops = append(ops, clientv3.OpPut(repairKey(client, seq), "", clientv3.WithLease(lease)))
		}
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		cancel()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.retention.drop(lease)
			s.dedup.drop(dedupLease)
			continue
		}
		if err != nil {
			return 0, false, err
		}
		return seq, resp.Succeeded, nil
	}
	return 0, false, errors.New("leases keep vanishing")
}

// store writes the payload to every core at once and returns where it is
// stored. A core that is down, or slower than PublishTimeout, is left out;
// the repair loop copies the payload to it later.
func (s *Service) store(ctx context.Context, client string, p *natsbusv1.NotificationPayload) map[string]uint64 {
	type result struct {
		core string
		seq  uint64
		err  error
	}
	results := make(chan result, len(s.cores))
	for _, c := range s.cores {
		go func() {
			ctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
			defer cancel()
			st, err := c.ready(ctx, s.stream, s.claim)
			var seq uint64
			if err == nil {
				seq, err = c.publish(ctx, st, client, p)
			}
			results <- result{c.Name(), seq, err}
		}()
	}
	at := make(map[string]uint64, len(s.cores))
	for range s.cores {
		r := <-results
		if r.err != nil {
			s.m.stores.WithLabelValues(r.core, "failed").Inc()
			s.log.DebugContext(ctx, "notification not stored on a core", slog.String("core", r.core), slog.String("client", client), slog.Any("error", r.err))
			continue
		}
		s.m.stores.WithLabelValues(r.core, "ok").Inc()
		at[r.core] = r.seq
	}
	return at
}

// Ack records that client received every notification up to seq and
// returns the acknowledged sequence number. Acknowledgements only move
// forward: seq below the current one is ErrAckBehind, beyond the last
// notification ErrAckBeyond, equal to it a no-op.
func (s *Service) Ack(ctx context.Context, client string, seq uint64) (uint64, error) {
	if !ValidClient(client) {
		return 0, ErrBadClient
	}
	if seq == 0 {
		return 0, errors.New("seq must be at least 1")
	}
	for range commitAttempts {
		st, err := s.readClient(ctx, client, "")
		if err != nil {
			return 0, fmt.Errorf("%w: etcd: %v", ErrUnavailable, err)
		}
		switch {
		case seq > st.top():
			return st.acked, fmt.Errorf("%w: seq %d, but the last notification for this client is %d", ErrAckBeyond, seq, st.top())
		case seq < st.acked:
			return st.acked, fmt.Errorf("%w: seq %d, but notifications up to %d are acknowledged already", ErrAckBehind, seq, st.acked)
		case seq == st.acked:
			return seq, nil
		}
		ok, freed, err := s.advance(ctx, client, st, seq)
		if err != nil {
			return 0, fmt.Errorf("%w: etcd: %v", ErrUnavailable, err)
		}
		if ok {
			s.m.acked.Add(float64(seq - st.acked))
			for _, l := range freed {
				select {
				case s.deletes <- l:
				default: // the payload expires with the stream's max age
				}
			}
			return seq, nil
		}
	}
	return 0, fmt.Errorf("%w: too many concurrent acknowledgements for client %s; retry", ErrUnavailable, client)
}

// advance moves the acknowledgement to seq if it did not move since st
// was read, and deletes the acknowledged entries; it returns their
// payloads' locations, to delete those too.
func (s *Service) advance(ctx context.Context, client string, st clientState, seq uint64) (bool, []location, error) {
	for range 2 {
		ctx, cancel := s.etcdCtx(ctx)
		lease, err := s.retention.get(ctx, s.cli)
		if err != nil {
			cancel()
			return false, nil, err
		}
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(ackedKey(client)), "=", st.ackedRev)).
			Then(
				clientv3.OpPut(ackedKey(client), strconv.FormatUint(seq, 10), clientv3.WithLease(lease)),
				clientv3.OpDelete(entryKey(client, 0), clientv3.WithRange(entryKey(client, seq+1)), clientv3.WithPrevKV()),
				clientv3.OpDelete(repairKey(client, 0), clientv3.WithRange(repairKey(client, seq+1))),
			).Commit()
		cancel()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.retention.drop(lease)
			continue
		}
		if err != nil || !resp.Succeeded {
			return false, nil, err
		}
		var freed []location
		for _, kv := range resp.Responses[1].GetResponseDeleteRange().PrevKvs {
			if e, err := parseEntry(kv.Value); err == nil {
				for core, at := range e.At {
					freed = append(freed, location{core, at})
				}
			}
		}
		return true, freed, nil
	}
	return false, nil, errors.New("leases keep vanishing")
}

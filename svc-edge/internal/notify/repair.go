package notify

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	natsbusv1 "shindo.dev/gen/shindo/natsbus/v1"
)

// repairBatch bounds the markers handled per round.
const repairBatch = 100

// repairLoop copies payloads to the cores that missed them. Every post
// stored on fewer than all cores left a marker in etcd (in the same
// transaction that committed it), so the work survives the edge that
// posted; both edges may work on the same marker, which is harmless: the
// copy is deduplicated by message ID and the location recorded by
// compare-and-swap.
func (s *Service) repairLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.RepairInterval)
	defer t.Stop()
	lastErr := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.ensureCores(ctx)
		err := s.repairRound(ctx)
		if ctx.Err() != nil {
			return
		}
		if msg := errString(err); msg != lastErr {
			if err != nil {
				s.log.WarnContext(ctx, "notification repair failed; will retry", slog.Any("error", err))
			} else {
				s.log.InfoContext(ctx, "notification repair working again")
			}
			lastErr = msg
		}
	}
}

// repairRound handles up to repairBatch markers from where the previous
// round stopped, so markers that cannot be repaired yet (their only
// holder is down) do not hold up the others.
func (s *Service) repairRound(ctx context.Context) error {
	from := s.repairFrom
	if from == "" {
		from = repairPrefix
	}
	ectx, cancel := s.etcdCtx(ctx)
	resp, err := s.cli.Get(ectx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(repairPrefix)),
		clientv3.WithLimit(repairBatch), clientv3.WithKeysOnly())
	cancel()
	if err != nil {
		return err
	}
	if resp.More {
		s.repairFrom = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	} else {
		s.repairFrom = ""
	}
	for _, kv := range resp.Kvs {
		if ctx.Err() != nil {
			return nil
		}
		client, seq, ok := parseRepairKey(string(kv.Key))
		if !ok {
			s.deleteKey(ctx, string(kv.Key))
			continue
		}
		if err := s.repair(ctx, client, seq, string(kv.Key)); err != nil {
			s.log.DebugContext(ctx, "notification not repaired yet", slog.String("client", client), slog.Uint64("seq", seq), slog.Any("error", err))
		}
	}
	return nil
}

// repair copies one notification's payload to every usable core that
// lacks it.
func (s *Service) repair(ctx context.Context, client string, seq uint64, marker string) error {
	ectx, cancel := s.etcdCtx(ctx)
	resp, err := s.cli.Get(ectx, entryKey(client, seq))
	cancel()
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 {
		// Acknowledged or expired since.
		s.deleteKey(ctx, marker)
		return nil
	}
	rev := resp.Kvs[0].ModRevision
	e, err := parseEntry(resp.Kvs[0].Value)
	if err != nil {
		s.deleteKey(ctx, marker)
		return err
	}
	at := maps.Clone(e.At)
	var p *natsbusv1.NotificationPayload
	var have bool
	for _, c := range s.cores {
		if _, ok := at[c.known()]; ok || len(at) >= len(s.cores) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
		st, err := c.ready(cctx, s.stream, s.claim)
		if err != nil {
			cancel()
			continue
		}
		if _, ok := at[c.known()]; ok {
			cancel() // reached for the first time just now, and a holder
			continue
		}
		if !have {
			if p, err = s.tryFetch(cctx, client, e); err != nil {
				cancel()
				if errors.Is(err, errNotHere) {
					// Nothing left to copy from: the reader will skip it.
					s.deleteKey(ctx, marker)
				}
				return err
			}
			have = true
		}
		n, err := c.publish(cctx, st, client, p)
		cancel()
		if err != nil {
			s.m.stores.WithLabelValues(c.Name(), "failed").Inc()
			continue
		}
		s.m.stores.WithLabelValues(c.Name(), "ok").Inc()
		at[c.known()] = n
	}
	complete := len(at) >= len(s.cores)
	if len(at) == len(e.At) {
		if complete {
			s.deleteKey(ctx, marker)
		}
		return nil
	}
	added := len(at) - len(e.At)
	e.At = at
	ops := []clientv3.Op{clientv3.OpPut(entryKey(client, seq), e.marshal(), clientv3.WithIgnoreLease())}
	if complete {
		ops = append(ops, clientv3.OpDelete(marker))
	}
	ectx, cancel = s.etcdCtx(ctx)
	defer cancel()
	tr, err := s.cli.Txn(ectx).If(clientv3.Compare(clientv3.ModRevision(entryKey(client, seq)), "=", rev)).Then(ops...).Commit()
	if err != nil {
		return err
	}
	if tr.Succeeded {
		s.m.repaired.Add(float64(added))
		s.log.InfoContext(ctx, "notification copied to the cores that missed it", slog.String("client", client), slog.Uint64("seq", seq), slog.Any("stored_at", at))
	}
	return nil
}

func (s *Service) deleteKey(ctx context.Context, key string) {
	ectx, cancel := s.etcdCtx(ctx)
	defer cancel()
	_, _ = s.cli.Delete(ectx, key)
}

// deleteLoop deletes acknowledged payloads from the cores, so that the
// stream holds mostly what is still to be delivered. Best effort: what is
// not deleted expires with the stream's max age.
func (s *Service) deleteLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case l := <-s.deletes:
			c := s.coreByName(l.core)
			if c == nil {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
			if st, err := c.ready(cctx, s.stream, s.claim); err == nil {
				_ = st.DeleteMsg(cctx, l.seq)
			}
			cancel()
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

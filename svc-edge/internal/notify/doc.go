// Package notify is the wide-area notification queue of the edges (SPEC
// §6): an app server posts a notification for a client ID at either edge;
// it is stored durably and delivered over that client's SSE stream at
// whichever edge the client is connected to, again until the client
// acknowledges it and never after, including after the client moves from
// one edge to the other or an edge dies.
//
// # Routes and API
//
//	POST /v1/notify      Authorization: Bearer <token>
//	                     {"client":"<id>","data":<JSON ≤ 4 KiB>,"id":"<optional>"}
//	                     → 202 {"id","seq"[,"duplicate":true]}; 400, 401, 413, 429, 503
//	POST /v1/notify/ack  {"client":"<id>","seq":N}  → 200 {"client","acked"}; 400, 409, 503
//
// A client ID (16–128 characters of A–Z a–z 0–9 . _ -) is chosen by the
// app server; knowing it is the capability to receive, like a push token,
// so acks need no token. Service.Subscribe hands the edge's SSE handler a
// channel of Notification for one client; Notification.JSON is the data
// line {"id","seq","client","time","data"}.
//
// # Storage: payloads on both cores, order and state in etcd
//
// Each core's NATS server keeps the JetStream stream of the hop
// natsbus.Notifications (NOTIFY, a subject per client: file storage
// fsynced per write, max age the retention, a byte cap that refuses rather
// than drops), each payload a shindo.natsbus.v1.NotificationPayload. A
// stored payload that does not decode — written as JSON by the edges
// before the contract, or corrupt — is counted
// (shindo_edge_notify_undecodable_total), logged and taken as absent from
// that core: the notification is read from another holder or skipped as
// missing, never delivered half-read. The two servers are separate, as
// everywhere in shindo (see cli/internal/natscmd), so a post is written to
// both at once. etcd (three members, one may be lost)
// holds per client: head (last sequence number), acked, owner, and one
// entry per committed notification naming where its payload is: core name
// (the server's JetStream domain) → stream sequence.
//
// A post stores the payload on every core it can reach within
// PublishTimeout first, and only then commits it: one etcd transaction that
// compares the client's head revision, sets head = N, writes entry N (and
// a repair marker if a core missed it) — retried on conflict. 202 means the
// notification is on every reachable core (at least one) and committed.
//
// Why not take the sequence number first and store after, as first
// suggested: with two edges posting for the same client, N+1 could be
// stored, delivered and cumulatively acknowledged while N was still being
// stored, so N — acknowledged to its poster — would never be delivered;
// and a reader of one core cannot tell "N not stored yet", "N never will
// be" and "N stored only on the other core" apart. Committing after
// storing gives contiguous sequence numbers, only ever above anything a
// client can have acknowledged, and a reader learns what exists from etcd,
// whichever core it can reach. A crash between store and commit leaves an
// orphan payload that expires; the poster got no 202 and retries (with
// "id", a retry within DedupWindow is stored and delivered once).
//
// A core that missed a post gets it later: the marker written in the commit
// transaction survives the posting edge, and every edge's repair loop
// copies such payloads from a holder and records the new location by
// compare-and-swap. Losing either core afterwards loses nothing; only a
// notification posted while one core was unreachable lives on one core
// until it is repaired.
//
// # Ownership and delivery
//
// Subscribe writes owner = {edge, subscription} with a compare-and-swap on
// the key's current ModRevision, bound to the edge's lease (LeaseTTL): a
// client connecting elsewhere takes over at once, whether the previous
// owner is alive or dead — the lease only cleans up after dead edges. The
// same transaction reads acked and the pending entries; a watch from that
// revision follows new entries, acks and the owner key. The previous owner
// sees the owner key change and closes its channel. Payloads are read by
// stream sequence from a core that holds them (no JetStream consumer per
// client); while no holder can be asked, delivery of that client waits
// rather than skipping, for the order and the acks are cumulative.
//
// Acks are cumulative and monotonic: a transaction compares the acked
// key's revision, moves it forward, deletes the acknowledged entries and
// markers, and their payloads are then deleted from the cores (best
// effort; they expire anyway). Unacknowledged notifications are delivered
// again by the next subscription, at any edge; clients ignore a seq they
// have processed already.
//
// # Bounds
//
// Bodies (2×MaxData+1 KiB; data ≤ MaxData compacted), MaxPending
// unacknowledged per client (429 beyond), Retention (etcd entries on a
// shared lease per hour, payload max age a little longer), DedupWindow,
// the stream's byte cap, the subscription's channel buffer.
package notify

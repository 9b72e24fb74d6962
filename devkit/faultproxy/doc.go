// Package faultproxy is a fault-injecting network proxy for tests. A test
// puts it between a station and svc-ingest to prove the uplink rules of
// SPEC §2-3 (ack timeout and one retransmission, switching to WebSocket
// after 4 timeouts, probing back to UDP) under loss, delay, jitter,
// blackholes, reordering and duplication, on real sockets.
//
// # UDP
//
// ListenUDP forwards datagrams between clients and one target. Each client
// address gets its own upstream socket, as a NAT would, so the target sees
// one source address per client and its replies find the right client.
// Impairments apply per Direction: Upstream is client → target (packets),
// Downstream is target → client (acks), so a test can, say, drop only acks.
//
// Each datagram is decided on arrival, in this order: Blackhole drops it;
// Drop drops it with that probability; a full queue drops it as overflow;
// it is due Delay plus a uniform draw from [0, Jitter) later, so Delay is a
// floor a test can rely on; Duplicate sends it twice, back to back, with
// that probability; Reorder holds it back, with that probability, and sends
// it right behind the next datagram of the same client and direction, or
// after Options.MaxHold if none comes. The datagram that releases a held
// one is never held itself, so a swap is always of two neighbours.
//
// Ordering: jitter alone MAY reorder datagrams, because it does on real
// networks and a receiver must cope (the server's anti-replay window exists
// for this). Options.KeepOrder makes each datagram due no earlier than the
// one before it on the same client and direction, so only Reorder reorders;
// it costs nothing, jitter then bunches datagrams instead of swapping them.
//
// # TCP
//
// ListenTCP forwards a byte stream per accepted connection (the WebSocket
// uplink). A stream has no datagrams to lose or swap, so only Delay, Jitter
// and Blackhole apply; Drop, Duplicate and Reorder are ignored. Every chunk
// read is due Delay plus jitter after it was read, never before the chunk
// ahead of it, so bytes stay in order. Blackhole holds chunks, and once its
// small per-connection buffer is full stops reading, so the sender's TCP
// window fills as on a dead path; connections stay open and, when the
// blackhole is cleared, the held bytes go on intact (as TCP retransmission
// would deliver them). SetRefuse makes new connections close at once and
// Reset cuts every current one.
//
// # Determinism, memory, lifecycle
//
// With Options.Seed set, whether the n-th datagram of a client in a
// direction is dropped, duplicated or held, and its jitter, are the same on
// every run, whatever the interleaving with other clients: each client and
// direction has its own generator, numbered in the order clients first
// appear. Every datagram that is not blackholed draws the same number of
// variates whatever the impairment, so changing one impairment does not
// shift the sequence the others see. Overflow depends on timing, not on
// the seed.
//
// Memory is bounded: at most Options.MaxQueue datagrams wait per direction
// (held or delayed) and at most Options.MaxFlows clients are mapped; a
// datagram over either cap is dropped and counted as overflow. Delays run on
// one scheduler goroutine per direction with a timer heap, not a goroutine
// per datagram; a datagram due at once with nothing waiting ahead of it in
// its direction is sent by the goroutine that read it, so a proxy that
// impairs nothing costs a read and a write per datagram and no hand-off.
//
// The proxies start when created and stop with Close, which returns after
// every goroutine they started has exited; like httptest.Server they have no
// Run(ctx), because a test owns them for its whole length. All methods are
// safe for concurrent use.
package faultproxy

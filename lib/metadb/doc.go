// Package metadb keeps the metadata database (SPEC §3, §5): the station
// registry — which stations exist, where they are, whether they are in
// service, and the keys their packets are signed with — and, beside it,
// earthquake reports, detections and the data API's clients.
//
// # Model
//
// A station (table stations) is identified by an ID chosen at provisioning
// and never reused: retiring a station (RetireStation) keeps its row, marked
// inactive with the time it was retired, so its ID can never be given to
// another device and old data never mixes with new. Retired stations stay in
// the registry services load, with registry.Station.InService false, so
// their packets are refused as retired rather than as unknown.
//
// Each station has keys (table station_keys), numbered by key ID from 1 in
// the order they were issued. Exactly one is current: the one the station
// signs with and the server acks with. Others are rotated-out keys, each
// with the time its acceptance ends (not_after); expired keys stay in the
// table as a record but are never handed to services.
//
// # Rotation and overlap
//
// RotateKey(id, overlap) issues a new random key under the next key ID and
// makes it current at once; the key that was current is accepted for
// overlap longer. The overlap covers the time between the rotation and the
// moment the station has learnt its new key, plus packets in flight and
// retransmissions: without it a station would lose every packet from the
// rotation until it is reconfigured. During the overlap both keys verify
// (registry.Station.KeyAt); after not_after only the new one does. A
// rotation never lengthens an old key's life, it can only shorten it: every
// previous key still accepted is cut to the new overlap too, so a rotation
// with overlap 0 revokes all old keys at once, the answer to a leaked key.
// Times are the database's clock (now()), as are the filters that decide
// which previous keys a snapshot carries; services compare not_after with
// their own clock, which NTP keeps within far less than any overlap.
//
// # Seq counter resets
//
// Stations number their packets with a strictly increasing seq, and ingest
// refuses a seq it has seen (a replay) or one far above the highest. A
// station whose counter really restarted would have every packet refused;
// ResetStationSeq records the moment an admin reset it (seq_reset_at,
// registry.Station.SeqResetMs), and ingest, seeing it in its registry,
// forgets the station's replay window and the journal records received
// before it. The time comes from the caller's clock (the data API's), to
// the millisecond; each reset of a station is later than the previous one.
//
// # Schema and migrations
//
// The schema is versioned by the embedded migrations/NNNN_*.sql files,
// applied in order by Migrate, each in its own transaction with its row in
// schema_migrations. Concurrent Migrate calls (every service migrates at
// start) are serialized by an advisory lock; a database migrated by a newer
// build is refused with ErrSchemaTooNew. CHECK constraints repeat the
// validation Store does first, so a hand edit cannot break the registry.
//
// # Keeping services fresh
//
// Triggers notify channel "shindo_stations" at commit of every change to a
// station or its keys. Source, a registry.Source, serves an in-memory
// registry.Set, reloads it shortly after a notification and also
// periodically (notifications are lost while the listener is reconnecting),
// and keeps the last good set when a reload fails: a service keeps checking
// packets through a database outage with the keys it has.
//
// # Reports, detections, API clients
//
// Detections (UpsertDetection) keep the update with the highest serial, so
// late, repeated and both cores' copies of an update leave one row.
// Reports carry their per-area intensities (report_areas) and the MD5 of
// their content (Report.ContentHash). CreateReport is idempotent by ID:
// the same content again returns the stored report, other content fails
// with ErrConflict. MergeDetectionReport writes the report derived from a
// final detection: both cores' data APIs do, in any order, and the stored
// report gains the union of their areas at the higher level. API clients
// (CreateClient) get a random key "shk_<key ID>.<secret>" shown once; only
// the SHA-256 of the secret is stored, and revocation is permanent. A
// client has a role (writer, subscriber, admin) and the topics of the
// edges' WebSocket API it may subscribe to (an admin: every topic);
// ClientsByKeys checks a batch of keys in one query.
//
// Table data_versions holds a counter per kind of data (reports,
// detections, stations) that triggers bump in the transaction of every
// change: the data API builds its ETags from them (DataVersions).
//
// # Errors
//
// Errors wrap the sentinels ErrNotFound, ErrExists, ErrRetired, ErrInvalid,
// ErrConflict, ErrUnavailable and ErrDatabase, with detail; database driver
// errors never escape this package.
package metadb

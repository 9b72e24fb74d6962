package notify

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The etcd key space, all under /shindo/notify/:
//
//	c/<client>/head      last sequence number given to the client (decimal)
//	c/<client>/acked     sequence number the client acknowledged up to (decimal)
//	c/<client>/owner     the subscription delivering to it (JSON owner), on the owner's lease
//	c/<client>/n/<seq>   one committed notification (JSON entry), until acknowledged
//	c/<client>/id/<id>   the sequence number of a poster-chosen ID, for the dedup window
//	repair/<client>/<seq> a notification held by fewer than all cores
//
// Sequence numbers in keys are 20-digit zero-padded so that key order is
// numeric order and ranges are key ranges. Client IDs contain no '/'.
const keyPrefix = "/shindo/notify/"

func clientPrefix(client string) string { return keyPrefix + "c/" + client + "/" }
func headKey(client string) string      { return clientPrefix(client) + "head" }
func ackedKey(client string) string     { return clientPrefix(client) + "acked" }
func ownerKey(client string) string     { return clientPrefix(client) + "owner" }
func entryPrefix(client string) string  { return clientPrefix(client) + "n/" }
func idKey(client, id string) string    { return clientPrefix(client) + "id/" + id }

func entryKey(client string, seq uint64) string { return entryPrefix(client) + padSeq(seq) }

const repairPrefix = keyPrefix + "repair/"

func repairKey(client string, seq uint64) string { return repairPrefix + client + "/" + padSeq(seq) }

func padSeq(seq uint64) string { return fmt.Sprintf("%020d", seq) }

// seqAfter parses the sequence number at the end of a key that starts
// with prefix.
func seqAfter(key, prefix string) (uint64, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || len(rest) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	return n, err == nil
}

// parseRepairKey splits repair/<client>/<seq>.
func parseRepairKey(key string) (client string, seq uint64, ok bool) {
	rest, ok := strings.CutPrefix(key, repairPrefix)
	if !ok {
		return "", 0, false
	}
	client, s, ok := strings.Cut(rest, "/")
	if !ok || !ValidClient(client) {
		return "", 0, false
	}
	seq, ok = seqAfter(s, "")
	return client, seq, ok
}

// parseCounter reads a decimal counter value; a missing key is 0.
func parseCounter(v []byte) uint64 {
	n, _ := strconv.ParseUint(string(v), 10, 64)
	return n
}

// entry is a committed notification in etcd: its ID, when it was posted,
// and where its payload is: core name (JetStream domain) → stream sequence.
type entry struct {
	ID     string            `json:"id"`
	Posted int64             `json:"t"`
	At     map[string]uint64 `json:"at"`
}

func (e entry) marshal() string {
	b, _ := json.Marshal(e)
	return string(b)
}

func parseEntry(v []byte) (entry, error) {
	var e entry
	if err := json.Unmarshal(v, &e); err != nil {
		return e, fmt.Errorf("notification entry: %w", err)
	}
	if e.ID == "" || len(e.At) == 0 {
		return e, fmt.Errorf("notification entry %q: no id or location", v)
	}
	return e, nil
}

// owner is the value of an ownership key.
type owner struct {
	Edge  string `json:"edge"`
	Sub   string `json:"sub"`
	Since int64  `json:"since"`
}

func parseOwner(v []byte) owner {
	var o owner
	_ = json.Unmarshal(v, &o)
	return o
}

// Notification is one notification delivered to a client.
type Notification struct {
	Client   string
	Seq      uint64
	ID       string
	PostedAt time.Time
	Data     json.RawMessage
}

// JSON is the notification as the data line of an SSE event:
// {"id":…,"seq":…,"client":…,"time":<Unix ms>,"data":…}. It has no line
// breaks (Data is compact JSON).
func (n Notification) JSON() []byte {
	b, _ := json.Marshal(struct {
		ID     string          `json:"id"`
		Seq    uint64          `json:"seq"`
		Client string          `json:"client"`
		Time   int64           `json:"time"`
		Data   json.RawMessage `json:"data"`
	}{n.ID, n.Seq, n.Client, n.PostedAt.UnixMilli(), n.Data})
	return b
}

package notify

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParsePost(t *testing.T) {
	t.Parallel()
	client := "app1.user-42_abcdefgh"
	cases := []struct {
		name, body string
		want       PostRequest
		err        string
	}{
		{"minimal", `{"client":"` + client + `","data":1}`, PostRequest{Client: client, Data: json.RawMessage(`1`)}, ""},
		{"compacted", "{\"client\":\"" + client + "\",\n \"data\": {\"a\": [1, 2],\n \"b\": \"x y\"}}", PostRequest{Client: client, Data: json.RawMessage(`{"a":[1,2],"b":"x y"}`)}, ""},
		{"with id", `{"client":"` + client + `","id":"n-1","data":null}`, PostRequest{Client: client, ID: "n-1", Data: json.RawMessage(`null`)}, ""},
		{"empty", ``, PostRequest{}, "empty body"},
		{"whitespace", " \n", PostRequest{}, "empty body"},
		{"array", `[]`, PostRequest{}, "JSON object"},
		{"truncated", `{"client":"` + client, PostRequest{}, "ends too early"},
		{"trailing", `{"client":"` + client + `","data":1} x`, PostRequest{}, "exactly one object"},
		{"unknown field", `{"client":"` + client + `","data":1,"ttl":5}`, PostRequest{}, "unknown field"},
		{"client number", `{"client":1,"data":1}`, PostRequest{}, `"client" must be a JSON string`},
		{"client short", `{"client":"abc","data":1}`, PostRequest{}, "16 to 128"},
		{"client long", `{"client":"` + strings.Repeat("a", 129) + `","data":1}`, PostRequest{}, "16 to 128"},
		{"client space", `{"client":"abcdefgh ijklmnopq","data":1}`, PostRequest{}, "16 to 128"},
		{"client unicode", `{"client":"abcdefghijklmnopé","data":1}`, PostRequest{}, "16 to 128"},
		{"no data", `{"client":"` + client + `"}`, PostRequest{}, `"data" is required`},
		{"id empty ok", `{"client":"` + client + `","id":"","data":1}`, PostRequest{Client: client, Data: json.RawMessage(`1`)}, ""},
		{"id too long", `{"client":"` + client + `","id":"` + strings.Repeat("i", 65) + `","data":1}`, PostRequest{}, "id"},
		{"bad UTF-8", "{\"client\":\"" + client + "\",\"data\":\"\xff\"}", PostRequest{}, "UTF-8"},
		{"data too large", `{"client":"` + client + `","data":"` + strings.Repeat("x", 100) + `"}`, PostRequest{}, "at most 64"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParsePost([]byte(c.body), 64)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Client != c.want.Client || got.ID != c.want.ID || !bytes.Equal(got.Data, c.want.Data) {
				t.Fatalf("got %+v (%s), want %+v (%s)", got, got.Data, c.want, c.want.Data)
			}
		})
	}
	if _, err := ParsePost([]byte(`{"client":"`+client+`","data":"`+strings.Repeat("x", 100)+`"}`), 64); !errors.Is(err, errTooLarge) {
		t.Fatalf("oversize data is not errTooLarge: %v", err)
	}
}

func TestParseAck(t *testing.T) {
	t.Parallel()
	client := "app1.user-42_abcdefgh"
	cases := []struct {
		name, body string
		want       uint64
		err        string
	}{
		{"ok", `{"client":"` + client + `","seq":7}`, 7, ""},
		{"max", `{"client":"` + client + `","seq":18446744073709551615}`, 1<<64 - 1, ""},
		{"overflow", `{"client":"` + client + `","seq":18446744073709551616}`, 0, "whole number"},
		{"zero", `{"client":"` + client + `","seq":0}`, 0, "from 1"},
		{"negative", `{"client":"` + client + `","seq":-1}`, 0, "whole number"},
		{"string", `{"client":"` + client + `","seq":"7"}`, 0, "whole number"},
		{"null", `{"client":"` + client + `","seq":null}`, 0, "whole number"},
		{"missing", `{"client":"` + client + `"}`, 0, `"seq" is required`},
		{"bad client", `{"client":"x","seq":1}`, 0, "16 to 128"},
		{"unknown", `{"client":"` + client + `","seq":1,"all":true}`, 0, "unknown field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseAck([]byte(c.body))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil || got.Seq != c.want || got.Client != client {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
}

func TestNotificationJSON(t *testing.T) {
	t.Parallel()
	n := Notification{Client: "app1.user-42_abcdefgh", Seq: 3, ID: "n-1", PostedAt: time.UnixMilli(1_700_000_000_123), Data: json.RawMessage(`{"a":"<b>"}`)}
	got := string(n.JSON())
	if want := `{"id":"n-1","seq":3,"client":"app1.user-42_abcdefgh","time":1700000000123,"data":{"a":"\u003cb\u003e"}}`; got != want {
		t.Fatalf("JSON() = %s, want %s", got, want)
	}
	var back struct {
		ID     string          `json:"id"`
		Seq    uint64          `json:"seq"`
		Client string          `json:"client"`
		Time   int64           `json:"time"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(got), &back); err != nil || back.ID != "n-1" || back.Seq != 3 || back.Client != n.Client || back.Time != n.PostedAt.UnixMilli() {
		t.Fatalf("JSON() = %s (%v)", got, err)
	}
	if strings.ContainsAny(got, "\r\n") {
		t.Fatalf("JSON() has a line break: %q", got)
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	client := "app1.user-42_abcdefgh"
	if seq, ok := seqAfter(entryKey(client, 42), entryPrefix(client)); !ok || seq != 42 {
		t.Fatalf("entry key round trip: %d %v", seq, ok)
	}
	if entryKey(client, 9) >= entryKey(client, 10) {
		t.Fatal("entry keys do not sort by sequence number")
	}
	c, seq, ok := parseRepairKey(repairKey(client, 7))
	if !ok || c != client || seq != 7 {
		t.Fatalf("repair key round trip: %q %d %v", c, seq, ok)
	}
	for _, bad := range []string{repairPrefix, repairPrefix + client, repairPrefix + "x/" + padSeq(1), repairPrefix + client + "/12"} {
		if _, _, ok := parseRepairKey(bad); ok {
			t.Fatalf("parseRepairKey(%q) accepted", bad)
		}
	}
}

// FuzzParsePost checks that no body crashes the parser and that whatever
// it accepts is what the rest of the service relies on.
func FuzzParsePost(f *testing.F) {
	for _, seed := range []string{
		`{"client":"app1.user-42_abcdefgh","data":{"title":"地震","level":5}}`,
		`{"client":"app1.user-42_abcdefgh","id":"order-1","data":"x"}`,
		`{"client":"app1.user-42_abcdefgh","data":null}`,
		"{\"client\":\"app1.user-42_abcdefgh\",\n\"data\":[1,\n2]}",
		`{"client":"short","data":1}`,
		`{"client":"app1.user-42_abcdefgh","data":1}{}`,
		`{"client":"app1.user-42_abcdefgh","data":"\ud800"}`,
		`[`, ``, `null`, `{"data":1e999}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParsePost(body, 256)
		if err != nil {
			if r.Client != "" || r.Data != nil {
				t.Fatalf("error %v with a result %+v", err, r)
			}
			return
		}
		if !ValidClient(r.Client) || (r.ID != "" && !validID(r.ID)) {
			t.Fatalf("accepted a bad client or id: %+v", r)
		}
		if len(r.Data) == 0 || len(r.Data) > 256 || !json.Valid(r.Data) || !utf8.Valid(r.Data) || bytes.ContainsAny(r.Data, "\r\n") {
			t.Fatalf("accepted data %q", r.Data)
		}
		n := Notification{Client: r.Client, ID: "x", Seq: 1, Data: r.Data}
		if line := n.JSON(); !json.Valid(line) || bytes.ContainsAny(line, "\r\n") {
			t.Fatalf("SSE line %q", line)
		}
	})
}

// FuzzParseAck checks the acknowledgement parser the same way.
func FuzzParseAck(f *testing.F) {
	for _, seed := range []string{
		`{"client":"app1.user-42_abcdefgh","seq":1}`,
		`{"client":"app1.user-42_abcdefgh","seq":18446744073709551615}`,
		`{"client":"app1.user-42_abcdefgh","seq":-1}`,
		`{"client":"app1.user-42_abcdefgh","seq":1.0}`,
		`{"client":"app1.user-42_abcdefgh","seq":"1"}`,
		`{"seq":1}`, `{}`, `1`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseAck(body)
		if err != nil {
			return
		}
		if !ValidClient(r.Client) || r.Seq == 0 {
			t.Fatalf("accepted %+v", r)
		}
	})
}

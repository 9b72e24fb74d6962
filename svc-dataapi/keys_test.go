package dataapi

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"shindo.dev/devkit/pgtest"
)

// keyCheck is one result of POST /v1/keys:check, in the proto's field
// names.
type keyCheck struct {
	Known  bool `json:"known"`
	Client *struct {
		KeyID     string   `json:"key_id"`
		Name      string   `json:"name"`
		Role      string   `json:"role"`
		RateLimit float64  `json:"rate_limit"`
		RateBurst int      `json:"rate_burst"`
		Topics    []string `json:"topics"`
		CreatedMs string   `json:"created_ms"`
		RevokedMs string   `json:"revoked_ms"`
	} `json:"client"`
}

// checkKeys posts keys to /v1/keys:check without a credential and returns
// the results, failing unless the answer is 200 with one result per key.
func checkKeys(t *testing.T, base string, keys ...string) []keyCheck {
	t.Helper()
	a := do(t, "POST", base+"/v1/keys:check", "", map[string]any{"keys": keys})
	if a.code != 200 {
		t.Fatalf("check %d keys: %d %s", len(keys), a.code, a.body)
	}
	var resp struct {
		Results []keyCheck `json:"results"`
	}
	dec := json.NewDecoder(strings.NewReader(string(a.body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&resp); err != nil || len(resp.Results) != len(keys) {
		t.Fatalf("check %d keys: %v: %s", len(keys), err, a.body)
	}
	if len(keys) <= 3 {
		t.Logf("POST /v1/keys:check → %s", a.body)
	}
	return resp.Results
}

// TestCheckKeys: the edges' key check, through REST against a real
// PostgreSQL: a subscriber key with topics is known with its client, a
// revoked one known and marked revoked, a malformed or unknown one not
// known; batches are bounded.
func TestCheckKeys(t *testing.T) {
	base := start(t, testConfig(t, "-database-url", pgtest.Shared(t).NewDatabase(t), "-admin-tokens", adminToken))

	a := do(t, "POST", base+"/v1/clients", adminToken, map[string]any{"name": "TREM app", "role": "subscriber", "topics": []string{"rts", "eew", "rts"}})
	if a.code != 200 {
		t.Fatalf("create subscriber: %d %s", a.code, a.body)
	}
	created := a.json(t)
	c := created["client"].(map[string]any)
	keyID, key := c["key_id"].(string), created["key"].(string)
	if c["role"] != "subscriber" || jsonText(t, c["topics"]) != `["eew","rts"]` {
		t.Fatalf("created %s", a.body)
	}
	if a := do(t, "GET", base+"/v1/clients", adminToken, nil); a.code != 200 ||
		jsonText(t, a.json(t)["clients"].([]any)[0].(map[string]any)["topics"]) != `["eew","rts"]` {
		t.Fatalf("list clients: %d %s", a.code, a.body)
	}
	// A subscriber holds none of the calls that need a role.
	if a := do(t, "POST", base+"/v1/reports", key, report("S1", 1, 1, 1)); a.code != 403 {
		t.Fatalf("subscriber posts a report: %d %s", a.code, a.body)
	}
	if a := do(t, "POST", base+"/v1/clients", key, map[string]any{"role": "subscriber"}); a.code != 403 {
		t.Fatalf("subscriber creates a client: %d %s", a.code, a.body)
	}

	unknown := "shk_0000000000000000." + key[len(key)-43:]
	r := checkKeys(t, base, key, "not-a-key", unknown)
	if !r[0].Known || r[0].Client == nil || r[0].Client.KeyID != keyID || r[0].Client.Role != "subscriber" ||
		!slices.Equal(r[0].Client.Topics, []string{"eew", "rts"}) || r[0].Client.RevokedMs != "0" || r[0].Client.Name != "TREM app" {
		t.Fatalf("subscriber key: %+v", r[0])
	}
	for i := 1; i < 3; i++ {
		if r[i].Known || r[i].Client != nil {
			t.Fatalf("key %d: %+v, want unknown", i, r[i])
		}
	}

	if a := do(t, "DELETE", base+"/v1/clients/"+keyID, adminToken, nil); a.code != 200 {
		t.Fatalf("revoke: %d %s", a.code, a.body)
	}
	r = checkKeys(t, base, key)
	if !r[0].Known || r[0].Client == nil || r[0].Client.RevokedMs == "0" || r[0].Client.RevokedMs == "" {
		t.Fatalf("revoked key: %+v", r[0])
	}

	tooMany := make([]string, 501)
	for i := range tooMany {
		tooMany[i] = unknown
	}
	for _, tc := range []struct {
		name string
		body any
		want int
	}{
		{"501 keys", map[string]any{"keys": tooMany}, 400},
		{"no keys", map[string]any{"keys": []string{}}, 400},
		{"empty body", map[string]any{}, 400},
		{"not a list", map[string]any{"keys": key}, 400},
		{"unknown field", map[string]any{"keys": []string{key}, "key": key}, 400},
		{"not JSON", "{", 400},
	} {
		a := do(t, "POST", base+"/v1/keys:check", "", tc.body)
		if a.code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, a.code, a.body, tc.want)
			continue
		}
		errorBody(t, a)
	}
	if n := len(checkKeys(t, base, tooMany[:500]...)); n != 500 {
		t.Fatalf("500 keys: %d results", n)
	}
	if a := do(t, "GET", base+"/v1/keys:check", "", nil); a.code != 405 && a.code != 404 {
		t.Errorf("GET: %d", a.code)
	}

	for _, topics := range [][]string{{"RTS"}, {""}, {"eew.*"}, {strings.Repeat("x", 65)}} {
		if a := do(t, "POST", base+"/v1/clients", adminToken, map[string]any{"role": "subscriber", "topics": topics}); a.code != 400 ||
			!strings.Contains(errorBody(t, a), "topics") {
			t.Errorf("topics %q: %d %s", topics, a.code, a.body)
		}
	}
}

// TestCheckKeysRateLimited: the check needs no credential, so it draws on
// the caller's address bucket like every anonymous call.
func TestCheckKeysRateLimited(t *testing.T) {
	base := start(t, testConfig(t, "-database-url", pgtest.Shared(t).NewDatabase(t), "-admin-tokens", adminToken,
		"-rate-limit-ip", "0.01", "-rate-burst-ip", "2"))
	body := map[string]any{"keys": []string{"shk_0000000000000000.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}
	for i := range 2 {
		if a := do(t, "POST", base+"/v1/keys:check", "", body); a.code != 200 {
			t.Fatalf("check %d: %d %s", i, a.code, a.body)
		}
	}
	if a := do(t, "POST", base+"/v1/keys:check", "", body); a.code != 429 || a.header.Get("Retry-After") == "" {
		t.Fatalf("past the address's burst: %d %s", a.code, a.body)
	}
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Package devcontrol is the client side of `shindo dev`'s control API,
// which `shindo fault` and `shindo chaos` drive: where a running shindo dev
// listens for it, and one call, its errors worded as the API words them.
package devcontrol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
)

// URL reads the control API's base URL from dir/endpoints.json.
func URL(dir string) (string, error) {
	path := filepath.Join(dir, "endpoints.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("no running shindo dev found (%v); start one with `make run`, or give its -dir", err)
	}
	var doc struct {
		Dev struct {
			Control string `json:"control"`
		} `json:"dev"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Dev.Control == "" {
		return "", fmt.Errorf("%s names no control API: is it from this version of shindo dev?", path)
	}
	return doc.Dev.Control, nil
}

// Error is an answer other than 200, with the API's own message.
type Error struct {
	Code int
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// NotFound tells whether err is the API not knowing a route or a name.
func NotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == http.StatusNotFound
}

// Call sends method to base+path and returns the answer's body (at most
// 1 MiB). client bounds the call; a start waits until its process is
// ready, so give POSTs time.
func Call(ctx context.Context, client *http.Client, method, base, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("control API at %s: %w (is shindo dev still running?)", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, &Error{Code: resp.StatusCode, Msg: e.Error}
		}
		return nil, &Error{Code: resp.StatusCode, Msg: "control API: " + resp.Status}
	}
	return body, nil
}

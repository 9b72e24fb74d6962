package service

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// EndOnStop runs a streaming RPC's body and returns early with Unavailable
// once stopping closes, so a graceful stop does not wait on streams that
// never end by themselves; clients reconnect (to a peer, or to this service
// after its restart) and resume. The body's stream is cancelled when the
// handler returns, which ends it too.
func EndOnStop(stopping <-chan struct{}, body func() error) error {
	done := make(chan error, 1)
	go func() { done <- body() }()
	select {
	case err := <-done:
		return err
	case <-stopping:
		return status.Error(codes.Unavailable, "server shutting down")
	}
}

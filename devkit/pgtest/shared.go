package pgtest

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
)

// One server per test binary: starting PostgreSQL costs about a second,
// creating a database a few milliseconds.
var shared struct {
	mainRunning atomic.Bool
	once        sync.Once
	server      *Server
	err         error
}

// Main runs the tests of a package that uses Shared, then stops the shared
// server. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// When TestMain returns, the test binary exits with the tests' status.
func Main(m *testing.M) {
	shared.mainRunning.Store(true)
	m.Run()
	if shared.server != nil {
		if err := shared.server.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: shared server: %v\n", err)
		}
	}
}

// Shared returns the test binary's shared server, starting it on first use.
// Tests should not stop it; they get their own databases with NewDatabase.
// It fails tb if the server cannot start, or if the package's TestMain does
// not call Main (which stops the server after the tests).
func Shared(tb testing.TB) *Server {
	tb.Helper()
	if !shared.mainRunning.Load() {
		tb.Fatal("pgtest: Shared needs the package's TestMain to call pgtest.Main: func TestMain(m *testing.M) { pgtest.Main(m) }")
	}
	shared.once.Do(func() {
		shared.server, shared.err = StartServer()
	})
	if shared.err != nil {
		tb.Fatalf("pgtest: shared server: %v", shared.err)
	}
	return shared.server
}

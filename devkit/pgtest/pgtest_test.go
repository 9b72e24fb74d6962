package pgtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func databaseExists(t *testing.T, s *Server, dsn string) bool {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	err = connect(t, s.DSN()).QueryRow(context.Background(),
		"SELECT count(*) FROM pg_database WHERE datname = $1", cfg.Database).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestNewDatabaseIsFreshAndDropped(t *testing.T) {
	t.Parallel()
	s := Shared(t)
	var first string
	t.Run("use", func(t *testing.T) {
		first = s.NewDatabase(t)
		second := s.NewDatabase(t)
		if first == second {
			t.Fatalf("two databases share the URL %s", first)
		}
		ctx := context.Background()
		conn := connect(t, first)
		if _, err := conn.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
			t.Fatal(err)
		}
		var n int
		err := connect(t, second).QueryRow(ctx,
			"SELECT count(*) FROM information_schema.tables WHERE table_name = 't'").Scan(&n)
		if err != nil || n != 0 {
			t.Fatalf("second database sees the first's table: n=%d err=%v", n, err)
		}
		// Left open on purpose: the drop must not wait for it.
		_ = connect(t, second)
	})
	if databaseExists(t, s, first) {
		t.Fatalf("database %s not dropped after its test", first)
	}
}

func TestStopKillRestart(t *testing.T) {
	t.Parallel()
	s := Start(t)
	if s == Shared(t) {
		t.Fatal("Start returned the shared server")
	}
	ctx := context.Background()
	dsn := s.NewDatabase(t)
	conn := connect(t, dsn)
	if _, err := conn.Exec(ctx, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	refused := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			c.Close(ctx)
			t.Fatalf("server accepts connections after %s", what)
		}
	}
	count := func() int {
		t.Helper()
		var n int
		if err := connect(t, dsn).QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	refused("Stop")
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart of a running server succeeded")
	}
	if _, err := connect(t, dsn).Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}

	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	refused("Kill")
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("after a kill and crash recovery: %d rows, want the 2 committed", n)
	}
}

func TestFindBinariesNamesWhatToInstall(t *testing.T) {
	t.Setenv("SHINDO_PG_BIN", t.TempDir())
	_, err := StartServer()
	if err == nil || !strings.Contains(err.Error(), "install the PostgreSQL server") {
		t.Fatalf("err = %v, want a hint naming what to install", err)
	}
}

func TestDBNameFrom(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"TestX":                        "testx",
		"TestX/sub_case#01":            "testx_sub_case_01",
		"Test'; DROP DATABASE x; --":   "test_drop_database_x",
		strings.Repeat("TestLong", 20): strings.Repeat("testlong", 6),
	} {
		if got := dbNameFrom(in); got != want {
			t.Errorf("dbNameFrom(%q) = %q, want %q", in, got, want)
		}
	}
}

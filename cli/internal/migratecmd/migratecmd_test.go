package migratecmd

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"shindo.dev/devkit/pgtest"
	"shindo.dev/lib/metadb"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestMigrateThenUpToDate(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Shared(t).NewDatabase(t)
	latest := metadb.LatestVersion()

	code, stdout, stderr := runCmd(t, "-database-url", dsn)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, "applied schema versions 1, 2") ||
		!strings.Contains(stdout, fmt.Sprintf("schema up to date at version %d\n", latest)) {
		t.Fatalf("stdout = %q", stdout)
	}

	code, stdout, stderr = runCmd(t, "-database-url="+dsn)
	if code != 0 || stderr != "" || stdout != fmt.Sprintf("schema up to date at version %d\n", latest) {
		t.Fatalf("second run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestDatabaseURLFromEnvironment(t *testing.T) {
	dsn := pgtest.Shared(t).NewDatabase(t)
	t.Setenv("SHINDO_MIGRATE_DATABASE_URL", dsn)
	if code, stdout, stderr := runCmd(t); code != 0 || !strings.Contains(stdout, "up to date") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Shared(t).NewDatabase(t)
	if code, _, stderr := runCmd(t, "-database-url", dsn); code != 0 {
		t.Fatal(stderr)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES (9999)"); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd(t, "-database-url", dsn)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "version 9999") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		args      []string
		code      int
		wantErr   string
		forbidden string
	}{
		{"no database url", nil, 2, "database-url is required", ""},
		{"unknown flag", []string{"-database", "x"}, 2, "flag provided but not defined", ""},
		{"bad timeout", []string{"-database-url", "postgres://x", "-timeout", "0s"}, 2, "timeout must be positive", ""},
		{"unparsable url", []string{"-database-url", "postgres://u:s3cret@127.0.0.1:notaport/db"}, 1, "database-url", "s3cret"},
		{"unreachable database", []string{"-database-url", "postgres://u:s3cret@127.0.0.1:1/db?sslmode=disable&connect_timeout=5"}, 1,
			"connect to the metadata database", "s3cret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCmd(t, tt.args...)
			if code != tt.code || stdout != "" || !strings.Contains(stderr, tt.wantErr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, tt.code, tt.wantErr)
			}
			if !strings.HasPrefix(stderr, "shindo migrate: ") || strings.Count(stderr, "\n") != 1 {
				t.Errorf("stderr is not one line naming the command: %q", stderr)
			}
			if tt.forbidden != "" && strings.Contains(stderr, tt.forbidden) {
				t.Errorf("stderr shows the password: %q", stderr)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCmd(t, "-h")
	if code != 0 || stderr != "" || !strings.Contains(stdout, "SHINDO_MIGRATE_DATABASE_URL") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

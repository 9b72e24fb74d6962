package pgserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A data directory is missing, empty (both get an initdb), or holds a
// cluster, which is reused.
type dirState int

const (
	dirMissing dirState = iota
	dirEmpty
	dirCluster
)

// inspectDataDir tells what dir holds and, for a cluster, its major version.
func inspectDataDir(dir string) (dirState, int, error) {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return dirMissing, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if !st.IsDir() {
		return 0, 0, fmt.Errorf("data dir %s is a file, not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if len(entries) == 0 {
		return dirEmpty, 0, nil
	}
	version, err := os.ReadFile(filepath.Join(dir, "PG_VERSION"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, fmt.Errorf("data dir %s is not empty but holds no PostgreSQL cluster (no PG_VERSION): "+
			"empty it or choose another directory", dir)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("data dir %s: %w", dir, err)
	}
	major, err := strconv.Atoi(strings.TrimSpace(string(version)))
	if err != nil {
		return 0, 0, fmt.Errorf("data dir %s belongs to PostgreSQL %s, which is too old to run here: "+
			"move it away to start afresh", dir, strings.TrimSpace(string(version)))
	}
	return dirCluster, major, nil
}

// checkClusterMajor fails unless the binaries in bin run clusters of major.
func checkClusterMajor(dir string, major int, bin string) error {
	binMajor, err := binaryMajor(bin)
	if err != nil {
		return err
	}
	switch {
	case binMajor == major:
		return nil
	case major > binMajor:
		return fmt.Errorf("data dir %s belongs to PostgreSQL %d, newer than the server binaries in %s (PostgreSQL %d): "+
			"install postgresql-%d or set SHINDO_PG_BIN to its binaries", dir, major, bin, binMajor, major)
	default:
		return fmt.Errorf("data dir %s belongs to PostgreSQL %d, older than the server binaries in %s (PostgreSQL %d): "+
			"install postgresql-%d or set SHINDO_PG_BIN to its binaries, upgrade the cluster with pg_upgrade, "+
			"or move the data dir away to start afresh", dir, major, bin, binMajor, major)
	}
}

// checkOwner fails unless dir belongs to the user the server runs as, which
// PostgreSQL insists on.
func checkOwner(dir string, cred *syscall.Credential) error {
	want := uint32(os.Geteuid())
	if cred != nil {
		want = cred.Uid
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || sys.Uid == want {
		return nil
	}
	return fmt.Errorf("data dir %s belongs to uid %d, but the server runs as uid %d and PostgreSQL only runs a cluster as its owner: "+
		"run as its owner, set SHINDO_PG_USER (when root), or chown -R the data dir", dir, sys.Uid, want)
}

// mkdirFor creates dir (mode perm) and its missing parents (0755, so that
// the server's user can pass through them), and hands dir to the server's
// user when we run as root. An existing dir is left alone.
func mkdirFor(dir string, perm fs.FileMode, cred *syscall.Credential) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, perm); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	}
	return chownTo(dir, cred)
}

func chownTo(path string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	if err := os.Chown(path, int(cred.Uid), int(cred.Gid)); err != nil {
		return fmt.Errorf("hand %s to the server's user: %w", path, err)
	}
	return nil
}

// initdb creates a cluster in s.dataDir, which is missing or empty, with the
// superuser "postgres" trusted on the unix socket and on loopback TCP.
func (s *Server) initdb(ctx context.Context) error {
	if err := mkdirFor(s.dataDir, 0o700, s.cred); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if err := chownTo(s.dataDir, s.cred); err != nil { // an empty dir we did not create
		return err
	}
	args := []string{"-D", s.dataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"}
	if !s.opts.Durable {
		args = append(args, "--no-sync")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "initdb"), args...)
	cmd.Dir = "/" // the server's user may not be able to enter ours
	cmd.Env = serverEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	// Interrupted, initdb removes what it has written, so that the next
	// start finds an empty directory rather than half a cluster.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("initdb: %w", ctx.Err())
		}
		if msg := firstLineAfter(out, "initdb: error:"); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return fmt.Errorf("initdb: %v%s\n%s", err, s.accessHint(), tail(out, 30))
	}
	_, major, err := inspectDataDir(s.dataDir)
	if err != nil {
		return fmt.Errorf("after initdb: %w", err)
	}
	s.major = major
	return nil
}

// accessHint names, when the server runs as another user, the first
// directory on the way to its data or socket directory that this user
// cannot enter, the usual reason initdb or postgres fails as root. It reads
// mode bits only, which ACLs may override: a hint, not a verdict.
func (s *Server) accessHint() string {
	if s.cred == nil {
		return ""
	}
	for _, path := range []string{s.dataDir, s.SocketDir()} {
		if path == "" {
			continue
		}
		for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
			if st, err := os.Stat(dir); err == nil && !searchableBy(st, s.cred) {
				return fmt.Sprintf(" (the server runs as uid %d, which cannot enter %s: chmod o+x it or choose a directory elsewhere)",
					s.cred.Uid, dir)
			}
			if dir == filepath.Dir(dir) {
				break
			}
		}
	}
	return ""
}

// searchableBy reports whether the mode bits of a directory let cred enter
// it. The server runs with no supplementary groups, so only cred.Gid counts.
func searchableBy(st fs.FileInfo, cred *syscall.Credential) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := st.Mode().Perm()
	switch {
	case sys.Uid == cred.Uid:
		return perm&0o100 != 0
	case sys.Gid == cred.Gid:
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

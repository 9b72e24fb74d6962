package pgserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

const installHint = "install the PostgreSQL server (Debian/Ubuntu: apt-get install postgresql-15; " +
	"Fedora: dnf install postgresql15-server; macOS: brew install postgresql@15) " +
	"or set SHINDO_PG_BIN to the directory holding initdb and postgres"

// binDirPatterns are where packages put each major version's binaries apart:
// Debian and Ubuntu, the PGDG packages for Fedora and RHEL, and Homebrew's
// versioned formulae (Apple silicon, then Intel).
var binDirPatterns = []string{
	"/usr/lib/postgresql/*/bin",
	"/usr/pgsql-*/bin",
	"/opt/homebrew/opt/postgresql@*/bin",
	"/usr/local/opt/postgresql@*/bin",
}

// findBinaries returns the directory holding initdb and postgres: override
// if set, else $SHINDO_PG_BIN, else the versioned install of major want
// (when it is not 0) or the newest one, else PATH.
func findBinaries(override string, want int) (string, error) {
	if override != "" {
		if !hasBinaries(override) {
			return "", fmt.Errorf("BinDir %s has no initdb and postgres: %s", override, installHint)
		}
		return override, nil
	}
	if dir := os.Getenv("SHINDO_PG_BIN"); dir != "" {
		if !hasBinaries(dir) {
			return "", fmt.Errorf("SHINDO_PG_BIN=%s has no initdb and postgres: %s", dir, installHint)
		}
		return dir, nil
	}
	var dirs []string
	for _, pattern := range binDirPatterns {
		matches, _ := filepath.Glob(pattern)
		dirs = append(dirs, matches...)
	}
	// The wanted major first, then the newest.
	sort.SliceStable(dirs, func(i, j int) bool {
		mi, mj := majorOfDir(dirs[i]), majorOfDir(dirs[j])
		if (mi == want) != (mj == want) {
			return mi == want
		}
		return mi > mj
	})
	for _, dir := range dirs {
		if hasBinaries(dir) {
			return dir, nil
		}
	}
	if initdb, err := exec.LookPath("initdb"); err == nil && hasBinaries(filepath.Dir(initdb)) {
		return filepath.Dir(initdb), nil
	}
	return "", errors.New("PostgreSQL server binaries (initdb, postgres) not found in $SHINDO_PG_BIN, " +
		strings.Join(binDirPatterns, ", ") + " or PATH: " + installHint)
}

func hasBinaries(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.IsDir() {
			return false
		}
	}
	return true
}

var lastNumber = regexp.MustCompile(`[0-9]+`)

// majorOfDir reads the major version from a versioned binary directory such
// as /usr/lib/postgresql/15/bin; 0 if it names none.
func majorOfDir(dir string) int {
	nums := lastNumber.FindAllString(dir, -1)
	if len(nums) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(nums[len(nums)-1])
	return n
}

var versionOutput = regexp.MustCompile(`\(PostgreSQL\) ([0-9]+)`)

// binaryMajor asks the postgres binary in dir for its major version.
func binaryMajor(dir string) (int, error) {
	out, err := exec.Command(filepath.Join(dir, "postgres"), "-V").Output()
	if err != nil {
		return 0, fmt.Errorf("%s -V: %w", filepath.Join(dir, "postgres"), err)
	}
	m := versionOutput.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("%s -V: unrecognised version %q", filepath.Join(dir, "postgres"), strings.TrimSpace(string(out)))
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n, nil
}

// serverCredential returns the user to run the server as when we are root,
// and nil otherwise: PostgreSQL refuses to run as root.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	name := os.Getenv("SHINDO_PG_USER")
	if name == "" {
		name = "postgres"
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses to run as root, but there is no user %q to run it as "+
			"(create one, e.g. useradd --system %s, set SHINDO_PG_USER, or run as a normal user): %w", name, name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %q has a non-numeric uid or gid", name)
	}
	if uid == 0 {
		return nil, fmt.Errorf("user %q is root, and PostgreSQL refuses to run as root", name)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// serverEnv is our environment without PG* variables, which would point
// initdb or postgres elsewhere, and with the C locale, which every system has.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "LC_") && !strings.HasPrefix(kv, "LANG") {
			env = append(env, kv)
		}
	}
	return append(env, "LC_ALL=C", "LANG=C")
}

// BinDir returns the directory of the PostgreSQL server binaries of major
// (0: the newest installed), found as Start finds them — for tools such as
// Patroni that run the server themselves.
func BinDir(major int) (string, error) { return findBinaries("", major) }

// RunAs returns the user the server must run as when we are root (see
// SHINDO_PG_USER), and nil otherwise.
func RunAs() (*syscall.Credential, error) { return serverCredential() }

// Package proc supervises the child processes of `shindo dev`: each runs in
// its own process group with its output in a log file, dies with its parent
// (Linux parent-death signal), and is stopped with SIGTERM, then SIGKILL
// after a deadline, so nothing is left behind.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Proc is one supervised child process.
type Proc struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	log     *os.File
	done    chan struct{}
	err     error
	started time.Time
}

// Spec describes a process to run.
type Spec struct {
	Name, Bin string
	Args      []string
	// Env is added to this process's environment ("KEY=value").
	Env []string
	// LogPath receives stdout and stderr; truncated unless Append.
	LogPath string
	Append  bool
	// As runs the process as another user (PostgreSQL and Patroni refuse
	// to run as root); nil runs it as this process's user.
	As *syscall.Credential
}

// Start runs bin with args and, on top of this process's environment, env
// ("KEY=value"), writing its stdout and stderr to logPath, which it
// truncates.
func Start(name, bin string, args, env []string, logPath string) (*Proc, error) {
	return Run(Spec{Name: name, Bin: bin, Args: args, Env: env, LogPath: logPath})
}

// Restart is Start for a process that ran before: its log is appended to,
// so what happened before the restart stays readable.
func Restart(name, bin string, args, env []string, logPath string) (*Proc, error) {
	return Run(Spec{Name: name, Bin: bin, Args: args, Env: env, LogPath: logPath, Append: true})
}

// Run starts the process spec describes.
func Run(spec Spec) (*Proc, error) {
	name, logPath := spec.Name, spec.LogPath
	mode := os.O_TRUNC
	if spec.Append {
		mode = os.O_APPEND
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|mode, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	cmd := exec.Command(spec.Bin, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: spec.As}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, log: f, done: make(chan struct{}), started: time.Now()}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Started returns when the process was started.
func (p *Proc) Started() time.Time { return p.started }

// Pid returns the process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err returns how the process ended; valid after Done.
func (p *Proc) Err() error { return p.err }

// Signal sends sig to the process group.
func (p *Proc) Signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Stop sends SIGTERM and waits until deadline, then kills the group. It
// reports whether the process stopped on its own.
func (p *Proc) Stop(deadline time.Time) bool {
	select {
	case <-p.done:
		return true
	default:
	}
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(time.Until(deadline)):
		p.Signal(syscall.SIGKILL)
		<-p.done
		return false
	}
}

// Tail returns the last n lines of the process's log.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// ExitDescription says how the process ended, for an error message.
func (p *Proc) ExitDescription() string {
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return strings.TrimPrefix(ee.Error(), "exit ")
	}
	if p.err == nil {
		return "status 0"
	}
	return p.err.Error()
}

// Restarts decides when a process that exited unasked runs again, the way
// a production supervisor does (systemd's Restart=on-failure with
// RestartSec and StartLimitBurst, Kubernetes' crash-loop back-off): soon
// after one that had been running a while — a crash or a kill from outside
// — with doubling delays after one that keeps exiting soon after it
// started, and not at all after Limit such exits in a row, when something
// is wrong that restarting will not mend.
type Restarts struct {
	// Initial is the delay after a healthy run, doubled after each short
	// run up to Max.
	Initial, Max time.Duration
	// Healthy is how long a run must last to count as healthy: it resets
	// the count of short runs.
	Healthy time.Duration
	// Limit is how many short runs in a row make the supervisor give up.
	Limit int

	short int
}

// DefaultRestarts is the policy of `shindo dev`: a killed process is back
// within a quarter second plus its start, and one that cannot run is
// given up on after five tries in about eight seconds.
func DefaultRestarts() *Restarts {
	return &Restarts{Initial: 250 * time.Millisecond, Max: 8 * time.Second, Healthy: 15 * time.Second, Limit: 5}
}

// Exited records a run that lasted ranFor and returns how long to wait
// before the next, or giveUp.
func (r *Restarts) Exited(ranFor time.Duration) (delay time.Duration, giveUp bool) {
	if ranFor >= r.Healthy {
		r.short = 0
		return r.Initial, false
	}
	r.short++
	if r.short >= r.Limit {
		return 0, true
	}
	delay = r.Initial
	for range r.short {
		delay *= 2
		if delay >= r.Max {
			return r.Max, false
		}
	}
	return delay, false
}

// ShortRuns is how many runs in a row ended before they were healthy.
func (r *Restarts) ShortRuns() int { return r.short }

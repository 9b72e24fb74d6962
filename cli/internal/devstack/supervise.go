package devstack

import (
	"fmt"
	"log/slog"
	"time"

	"shindo.dev/cli/internal/proc"
)

// supervise restarts p whenever it exits unasked — a crash, a kill -9 from
// outside, the OOM killer — as systemd or Kubernetes would, so one dead
// process is a fault the rest of the topology rides out and not the end of
// the demonstration. A process taken down through the control API stays
// down (its down flag is set, or a newer run replaced pr); one that keeps
// exiting soon after it starts is given up on, and shindo dev stops
// naming it.
func (s *stack) supervise(p *process, pr *proc.Proc) {
	for {
		<-pr.Done()
		if !s.unasked(p, pr) {
			return
		}
		ran := time.Since(pr.Started())
		s.mu.Lock()
		if p.restarts == nil {
			p.restarts = proc.DefaultRestarts()
		}
		delay, giveUp := p.restarts.Exited(ran)
		short := p.restarts.ShortRuns()
		s.mu.Unlock()
		if giveUp {
			s.fail(fmt.Errorf("%s keeps failing: it exited %d times in a row within %s of starting, last (%s); last lines of %s:\n%s",
				p.name, short, proc.DefaultRestarts().Healthy, pr.ExitDescription(), pr.LogPath, pr.Tail(8)))
			return
		}
		s.log.Warn("process exited unasked; restarting", slog.String("process", p.name),
			slog.String("exit", pr.ExitDescription()), slog.Duration("ran", ran.Round(time.Millisecond)),
			slog.Duration("restart_in", delay), slog.String("log", pr.LogPath), slog.String("last_lines", pr.Tail(5)))
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(delay):
		}
		next, err := s.restart(p, pr)
		if err != nil {
			s.fail(fmt.Errorf("restart %s: %w", p.name, err))
			return
		}
		if next == nil {
			return // taken down, or started, through the control API meanwhile
		}
		pr = next
		go s.announce(p, pr)
	}
}

// unasked reports whether pr, p's current run, ended without anyone asking.
func (s *stack) unasked(p *process, pr *proc.Proc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return p.proc == pr && !p.down && s.ctx.Err() == nil
}

// restart runs p again unless, while the supervisor waited, the control
// API took it down or ran it itself (then nil).
func (s *stack) restart(p *process, old *proc.Proc) (*proc.Proc, error) {
	s.actMu.Lock()
	defer s.actMu.Unlock()
	if !s.unasked(p, old) {
		return nil, nil
	}
	return s.run(p, true)
}

// announce logs a restarted process once it is ready and records its new
// process ID in endpoints.json.
func (s *stack) announce(p *process, pr *proc.Proc) {
	if err := waitReady(s.ctx, p, pr, s.cfg.ReadyTimeout); err != nil {
		if s.ctx.Err() == nil && !isDone(pr) {
			s.log.Warn("restarted process not ready", slog.String("process", p.name), slog.Any("err", err))
		}
		return
	}
	s.log.Info("restarted", slog.String("process", p.name), slog.Int("pid", pr.Pid()))
	if err := s.endpoints(); err != nil {
		s.log.Warn("endpoints.json not rewritten", slog.Any("err", err))
	}
}

// fail hands the first fatal supervision error to shindo dev's main loop.
func (s *stack) fail(err error) {
	select {
	case s.failed <- err:
	default:
	}
}

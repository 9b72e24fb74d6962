// Command testtimes reads `go test -json` on standard input and prints what
// a plain `go test` would — the output of tests that failed or never ended,
// and a line per package — plus a line as each top-level test ends and, at
// the end, every top-level test's duration, longest first.
//
// The end-to-end tier runs for over twenty minutes; without this, its log
// says only "ok" at the end, and where the time goes is unknown. The whole
// event stream is also written to -json (if set), for a later look at the
// logs of tests that passed.
//
// It exits 1 unless every package passed: a build failure, a panic or a
// timeout ends a package without a pass.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

func main() {
	jsonOut := flag.String("json", "", "also write the event stream to this file")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(1)
	}
}

// event is test2json's record (go doc test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// test is one test's buffered output, printed only if it fails.
type test struct {
	output strings.Builder
	ended  bool
}

// result is a top-level test's end, for the closing table.
type result struct {
	name    string
	action  string
	elapsed time.Duration
}

var errFailed = errors.New("a package did not pass")

func run(in io.Reader, out io.Writer, jsonOut string) (err error) {
	tee := io.Discard
	if jsonOut != "" {
		f, err := os.Create(jsonOut)
		if err != nil {
			return fmt.Errorf("create %s: %w", jsonOut, err)
		}
		w := bufio.NewWriter(f)
		defer func() {
			if werr := errors.Join(w.Flush(), f.Close()); werr != nil && err == nil {
				err = fmt.Errorf("write %s: %w", jsonOut, werr)
			}
		}()
		tee = w
	}

	tests := map[string]*test{} // package + "\x00" + test name
	pkgOutput := map[string]*strings.Builder{}
	var results []result
	passed, failed := 0, 0

	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		_, _ = tee.Write(line)
		_, _ = tee.Write([]byte{'\n'})
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Action == "" {
			// Not an event: go test's own words (a build error before
			// -json took over). Pass it through.
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		if ev.Test == "" {
			switch ev.Action {
			case "build-output":
				// The compiler's words, for a package that then fails.
				fmt.Fprint(out, ev.Output)
			case "output":
				b := pkgOutput[ev.Package]
				if b == nil {
					b = &strings.Builder{}
					pkgOutput[ev.Package] = b
				}
				b.WriteString(ev.Output)
			case "pass", "skip":
				passed++
				fmt.Fprintf(out, "ok  \t%s\t%.3fs\n", ev.Package, ev.Elapsed)
			case "fail":
				failed++
				// Tests still running when the package ended were cut off
				// (a timeout's panic, a crash): their output says where.
				for key, t := range tests {
					if !t.ended && strings.HasPrefix(key, ev.Package+"\x00") {
						fmt.Fprintf(out, "=== %s (did not end)\n%s", strings.TrimPrefix(key, ev.Package+"\x00"), t.output.String())
					}
				}
				// The package's own output ends with its FAIL line.
				if b := pkgOutput[ev.Package]; b != nil {
					fmt.Fprint(out, b.String())
				}
			}
			continue
		}

		// A subtest's output goes to its top-level test's buffer, in the
		// order it came, so a failure prints the whole story once.
		top, _, isSub := strings.Cut(ev.Test, "/")
		key := ev.Package + "\x00" + top
		t := tests[key]
		if t == nil {
			t = &test{}
			tests[key] = t
		}
		switch ev.Action {
		case "output":
			t.output.WriteString(ev.Output)
		case "pass", "fail", "skip":
			if isSub {
				continue
			}
			t.ended = true
			elapsed := time.Duration(ev.Elapsed * float64(time.Second))
			results = append(results, result{name: ev.Test, action: ev.Action, elapsed: elapsed})
			if ev.Action == "fail" {
				// Its output ends with its own --- FAIL line.
				fmt.Fprint(out, t.output.String())
			} else {
				fmt.Fprintf(out, "--- %s: %s (%s)\n", strings.ToUpper(ev.Action), ev.Test, elapsed.Round(100*time.Millisecond))
			}
			t.output.Reset()
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read events: %w", err)
	}

	sort.SliceStable(results, func(i, j int) bool { return results[i].elapsed > results[j].elapsed })
	var total time.Duration
	for _, r := range results {
		total += r.elapsed
	}
	if total > 0 {
		fmt.Fprintf(out, "\ntop-level tests by duration (sum %s):\n", total.Round(time.Second))
		for _, r := range results {
			fmt.Fprintf(out, "%8s  %4.1f%%  %-4s  %s\n", r.elapsed.Round(100*time.Millisecond),
				100*r.elapsed.Seconds()/total.Seconds(), r.action, r.name)
		}
	}
	if failed > 0 || passed == 0 {
		return errFailed
	}
	return nil
}

// Package intensitycmd implements `shindo intensity FILE…`: the official JMA
// instrumental intensity, peak motions and real-time maximum of
// three-component acceleration records.
//
// It reads JMA's strong-motion CSV (rate and unit from the header) and plain
// three-column CSV/TSV (rate and unit from --rate and --unit), prints one
// JSON object per file (or a table with --format text), and reports bad
// input on stderr naming the file and line, carrying on with the other
// files; the exit status is then 2.
package intensitycmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"text/tabwriter"

	"shindo.dev/seismo/accelcsv"
	"shindo.dev/seismo/jma"
)

// Sample rates outside this range are refused: no accelerometer records
// them, and the real-time meter's buffers grow with the rate.
const (
	minRateHz = 1
	maxRateHz = 1000
)

// Result is one file's line of output.
type Result struct {
	File        string  `json:"file"`
	RateHz      float64 `json:"rate_hz"`
	Samples     int     `json:"samples"`
	A0Gal       float64 `json:"a0_gal"`
	Intensity   float64 `json:"intensity"`
	Reported    float64 `json:"reported"`
	Class       string  `json:"class"`
	PGAGal      float64 `json:"pga_gal"`
	PGVCms      float64 `json:"pgv_cms"`
	RealtimeMax float64 `json:"realtime_max"`
}

type options struct {
	plain  accelcsv.PlainOptions
	format string
	files  []string
}

// Main runs the command with args (after "intensity") and returns the exit
// status: 0, or 2 for bad flags or any bad file.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, code, done := parseFlags(args, stdout, stderr)
	if done {
		return code
	}
	out := newPrinter(opts.format, stdout)
	status := 0
	for _, name := range opts.files {
		if err := ctx.Err(); err != nil {
			fmt.Fprintf(stderr, "shindo intensity: %v\n", err)
			return 1
		}
		res, err := measureFile(name, opts.plain)
		if err != nil {
			fmt.Fprintf(stderr, "shindo intensity: %s: %v\n", name, err)
			status = 2
			continue
		}
		if err := out.print(res); err != nil {
			fmt.Fprintf(stderr, "shindo intensity: write: %v\n", err)
			return 1
		}
	}
	if err := out.flush(); err != nil {
		fmt.Fprintf(stderr, "shindo intensity: write: %v\n", err)
		return 1
	}
	return status
}

func parseFlags(args []string, stdout, stderr io.Writer) (opts options, code int, done bool) {
	fset := flag.NewFlagSet("shindo intensity", flag.ContinueOnError)
	fset.SetOutput(stderr)
	rate := fset.Float64("rate", 0, "sample rate `HZ` of plain (non-JMA) files")
	unit := fset.String("unit", "gal", "unit of plain files: gal or ms2")
	fset.StringVar(&opts.format, "format", "json", "output: json (one object per file) or text (a table)")
	fset.Usage = func() {
		w := fset.Output()
		fmt.Fprintln(w, "Usage: shindo intensity [flags] FILE...")
		fmt.Fprintln(w, "\nComputes the JMA instrumental intensity, PGA, PGV and real-time maximum of")
		fmt.Fprintln(w, "three-component acceleration records: JMA strong-motion CSV (rate and unit from")
		fmt.Fprintln(w, "its header) or plain three-column CSV/TSV (NS, EW, UD; give --rate). Use - for")
		fmt.Fprintln(w, "standard input.")
		fmt.Fprintln(w, "\nFlags:")
		fset.PrintDefaults()
	}
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fset.SetOutput(stdout)
			fset.Usage()
			return opts, 0, true
		}
		return opts, 2, true // the flag package has printed the error and usage
	}
	fail := func(format string, a ...any) (options, int, bool) {
		fmt.Fprintf(stderr, "shindo intensity: "+format+"\n", a...)
		fset.Usage()
		return opts, 2, true
	}
	u, err := accelcsv.ParseUnit(*unit)
	if err != nil {
		return fail("--unit: %v", err)
	}
	if *rate != 0 && (*rate < minRateHz || *rate > maxRateHz) {
		return fail("--rate %g: want %d–%d Hz", *rate, minRateHz, maxRateHz)
	}
	if opts.format != "json" && opts.format != "text" {
		return fail("--format %q: want json or text", opts.format)
	}
	opts.plain = accelcsv.PlainOptions{RateHz: *rate, Unit: u}
	opts.files = fset.Args()
	if len(opts.files) == 0 {
		return fail("no files given")
	}
	return opts, 0, false
}

func measureFile(name string, plain accelcsv.PlainOptions) (Result, error) {
	rec, err := readFile(name, plain)
	if err != nil {
		return Result{}, err
	}
	if rec.RateHz < minRateHz || rec.RateHz > maxRateHz {
		return Result{}, fmt.Errorf("%w: %g Hz is outside %d–%d Hz", accelcsv.ErrNoRate, rec.RateHz, minRateHz, maxRateHz)
	}
	official, err := jma.Instrumental(rec.RateHz, rec.NS, rec.EW, rec.UD)
	if err != nil {
		return Result{}, fmt.Errorf("intensity: %w", err)
	}
	rtMax, err := realtimeMax(rec)
	if err != nil {
		return Result{}, fmt.Errorf("real-time intensity: %w", err)
	}
	return Result{
		File:        name,
		RateHz:      rec.RateHz,
		Samples:     rec.Len(),
		A0Gal:       official.A0,
		Intensity:   official.I,
		Reported:    official.Reported(),
		Class:       official.Class().String(),
		PGAGal:      jma.PGA(rec.NS, rec.EW, rec.UD),
		PGVCms:      jma.PGV(rec.RateHz, rec.NS, rec.EW, rec.UD),
		RealtimeMax: rtMax,
	}, nil
}

func readFile(name string, plain accelcsv.PlainOptions) (*accelcsv.Record, error) {
	if name == "-" {
		return accelcsv.Read(os.Stdin, plain)
	}
	f, err := os.Open(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the file name is already in the message
		}
		return nil, err
	}
	defer f.Close()
	return accelcsv.Read(f, plain)
}

// realtimeMax replays the record through the station's real-time meter,
// updating every 500 ms, and settles the end as the end of a record.
func realtimeMax(rec *accelcsv.Record) (float64, error) {
	rt, err := jma.NewRealtime(rec.RateHz, jma.RealtimeConfig{})
	if err != nil {
		return 0, err
	}
	every := max(1, int(rec.RateHz/2+0.5))
	for i := range rec.NS {
		rt.Push(rec.NS[i], rec.EW[i], rec.UD[i])
		if (i+1)%every == 0 {
			rt.Update()
		}
	}
	rt.Flush()
	return rt.Max(), nil
}

type printer struct {
	json *json.Encoder
	tab  *tabwriter.Writer
}

func newPrinter(format string, w io.Writer) *printer {
	if format == "text" {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		// Every cell, FILE too, ends in a tab: a trailing cell would not be
		// a column and would run into the one before it.
		fmt.Fprintln(tw, "RATE(Hz)\tSAMPLES\tA0(gal)\tI\tREPORTED\tCLASS\tPGA(gal)\tPGV(cm/s)\tRT-MAX\tFILE\t")
		return &printer{tab: tw}
	}
	return &printer{json: json.NewEncoder(w)}
}

func (p *printer) print(r Result) error {
	if p.json != nil {
		return p.json.Encode(r)
	}
	_, err := fmt.Fprintf(p.tab, "%g\t%d\t%.2f\t%.3f\t%.1f\t%s\t%.1f\t%.2f\t%.3f\t%s\t\n",
		r.RateHz, r.Samples, r.A0Gal, r.Intensity, r.Reported, r.Class, r.PGAGal, r.PGVCms, r.RealtimeMax, r.File)
	return err
}

func (p *printer) flush() error {
	if p.tab != nil {
		return p.tab.Flush()
	}
	return nil
}

// Package conf fills a binary's typed configuration struct from defaults,
// environment variables and command-line flags, in that order of precedence.
//
// Every exported field of the struct (and of embedded structs) that has a
// `conf:"name"` tag becomes the flag -name and the environment variable
// SHINDO_<PREFIX>_<NAME> (dashes turned into underscores, upper case). The tag
// `default:"…"` gives the default for fields still zero when Load is called;
// a caller may instead preset a field, which then acts as its default. The
// tag `help:"…"` documents it, and `secret:"true"` masks it in logs.
//
// A secret may also be read from a file, named by the flag -name-file or the
// variable SHINDO_<PREFIX>_<NAME>_FILE (trailing newlines dropped; a list
// takes one item per line or comma-separated). Command lines are readable by
// every local user (ps, /proc/PID/cmdline), so a secret given as a flag is
// accepted but reported through Options.Warn.
//
// Supported field types: string, bool, int, int64, uint32, uint64, float64,
// time.Duration and []string (comma-separated).
package conf

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Validator is implemented by configuration structs that check themselves
// after loading.
type Validator interface {
	Validate() error
}

// ErrHelp is returned by Load when -h or -help was given; the usage has been
// written to the help writer.
var ErrHelp = flag.ErrHelp

// UsageError is what Load returns for a bad flag, variable or value: the
// operator's mistake, as opposed to a failure while running.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *UsageError) Unwrap() error { return e.Err }

// Options adjust Load.
type Options struct {
	// Env looks up environment variables; os.LookupEnv when nil.
	Env func(string) (string, bool)
	// Help receives the usage text on -h; os.Stderr when nil.
	Help io.Writer
	// Name is the program name shown in the usage.
	Name string
	// Warn receives advice about the configuration that is not an error
	// (a secret given on the command line); slog's default logger when nil.
	Warn func(msg string)
}

type field struct {
	name   string
	env    string
	help   string
	def    string
	hasDef bool
	secret bool
	value  reflect.Value
}

// Load fills cfg, a pointer to a struct, for the binary whose environment
// prefix is prefix (e.g. "INGEST" for SHINDO_INGEST_…), from its tag
// defaults, then the environment, then args. It validates the result when
// cfg implements Validator. Errors name the flag or variable at fault.
func Load(cfg any, prefix string, args []string, opts Options) error {
	err := load(cfg, prefix, args, opts)
	if err != nil && !errors.Is(err, ErrHelp) {
		return &UsageError{err}
	}
	return err
}

func load(cfg any, prefix string, args []string, opts Options) error {
	if opts.Env == nil {
		opts.Env = os.LookupEnv
	}
	if opts.Help == nil {
		opts.Help = os.Stderr
	}
	if opts.Warn == nil {
		opts.Warn = func(msg string) { slog.Warn(msg) }
	}
	fields, err := collect(cfg, prefix)
	if err != nil {
		return err
	}
	for _, f := range fields {
		if f.hasDef && f.value.IsZero() {
			if err := set(f.value, f.def); err != nil {
				return fmt.Errorf("default of -%s: %w", f.name, err)
			}
		}
	}
	for _, f := range fields {
		if v, ok := opts.Env(f.env); ok {
			if err := set(f.value, v); err != nil {
				return fmt.Errorf("%s: %w", f.env, err)
			}
		}
		if !f.secret {
			continue
		}
		if path, ok := opts.Env(f.env + "_FILE"); ok {
			if err := setFromFile(f.value, path); err != nil {
				return fmt.Errorf("%s_FILE: %w", f.env, err)
			}
		}
	}
	fs := flag.NewFlagSet(opts.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, f := range fields {
		if f.secret {
			fs.Var(flagValue{f.value}, f.name, fmt.Sprintf("%s (env %s); as a flag, local users can read it: prefer -%s-file", f.help, f.env, f.name))
			fs.Var(fileValue{f.value}, f.name+"-file", fmt.Sprintf("file holding -%s (env %s_FILE)", f.name, f.env))
			continue
		}
		fs.Var(flagValue{f.value}, f.name, fmt.Sprintf("%s (env %s)", f.help, f.env))
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(opts.Help)
			fmt.Fprintf(opts.Help, "Usage of %s:\n", opts.Name)
			fs.PrintDefaults()
			return ErrHelp
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	fs.Visit(func(fl *flag.Flag) {
		for _, f := range fields {
			if f.secret && f.name == fl.Name && fl.Value.String() != "" {
				opts.Warn(fmt.Sprintf("-%s was given on the command line, which every local user can read; use -%s-file or %s", f.name, f.name, f.env))
			}
		}
	})
	if v, ok := cfg.(Validator); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("invalid configuration: %w", err)
		}
	}
	return nil
}

// LogValue renders cfg for a log line, every field by flag name, with
// secrets masked.
func LogValue(cfg any) slog.Value {
	fields, err := collect(cfg, "")
	if err != nil {
		return slog.StringValue(err.Error())
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].name < fields[j].name })
	attrs := make([]slog.Attr, 0, len(fields))
	for _, f := range fields {
		s := flagValue{f.value}.String()
		if f.secret && s != "" {
			s = "***"
		}
		attrs = append(attrs, slog.String(f.name, s))
	}
	return slog.GroupValue(attrs...)
}

func collect(cfg any, prefix string) ([]field, error) {
	rv := reflect.ValueOf(cfg)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("conf: need a pointer to a struct, got %T", cfg)
	}
	var out []field
	seen := map[string]bool{}
	var walk func(v reflect.Value) error
	walk = func(v reflect.Value) error {
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			fv := v.Field(i)
			if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
				if err := walk(fv); err != nil {
					return err
				}
				continue
			}
			name, ok := sf.Tag.Lookup("conf")
			if !ok || !sf.IsExported() {
				continue
			}
			if seen[name] {
				return fmt.Errorf("conf: duplicate option %q", name)
			}
			seen[name] = true
			if !supported(fv) {
				return fmt.Errorf("conf: option %q has unsupported type %s", name, sf.Type)
			}
			env := "SHINDO_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
			if prefix != "" {
				env = "SHINDO_" + prefix + "_" + env[len("SHINDO_"):]
			}
			def, hasDef := sf.Tag.Lookup("default")
			out = append(out, field{
				name:   name,
				env:    env,
				help:   sf.Tag.Get("help"),
				def:    def,
				hasDef: hasDef,
				secret: sf.Tag.Get("secret") == "true",
				value:  fv,
			})
		}
		return nil
	}
	if err := walk(rv.Elem()); err != nil {
		return nil, err
	}
	return out, nil
}

func supported(v reflect.Value) bool {
	switch v.Interface().(type) {
	case string, bool, int, int64, uint32, uint64, float64, time.Duration, []string:
		return true
	}
	return false
}

func set(v reflect.Value, s string) error {
	switch p := v.Addr().Interface().(type) {
	case *string:
		*p = s
	case *bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not a boolean", s)
		}
		*p = b
	case *int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		*p = n
	case *int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		*p = n
	case *uint32:
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not a non-negative 32-bit integer", s)
		}
		*p = uint32(n)
	case *uint64:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a non-negative integer", s)
		}
		*p = n
	case *float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		*p = f
	case *time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (e.g. 500ms, 3s)", s)
		}
		*p = d
	case *[]string:
		*p = nil
		for part := range strings.SplitSeq(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				*p = append(*p, part)
			}
		}
	default:
		return fmt.Errorf("unsupported type %s", v.Type())
	}
	return nil
}

// maxSecretFile bounds what a secret file may hold: a list of tokens or a
// URL, never a mistaken path to something large.
const maxSecretFile = 64 << 10

// setFromFile sets v from the file at path: the content less trailing
// newlines, a list one item per line.
func setFromFile(v reflect.Value, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return err
	}
	if len(b) > maxSecretFile {
		return fmt.Errorf("%s: larger than %d bytes", path, maxSecretFile)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if v.Kind() == reflect.Slice {
		s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", ","), "\n", ",")
	}
	return set(v, s)
}

// fileValue is the flag -name-file of a secret: setting it reads the file.
type fileValue struct{ v reflect.Value }

func (f fileValue) String() string { return "" }

func (f fileValue) Set(path string) error { return setFromFile(f.v, path) }

// flagValue adapts a struct field to flag.Value.
type flagValue struct{ v reflect.Value }

func (f flagValue) String() string {
	if !f.v.IsValid() {
		return ""
	}
	switch x := f.v.Interface().(type) {
	case []string:
		return strings.Join(x, ",")
	default:
		return fmt.Sprint(x)
	}
}

func (f flagValue) Set(s string) error { return set(f.v, s) }

// IsBoolFlag lets boolean options be given as a bare -name.
func (f flagValue) IsBoolFlag() bool { return f.v.Kind() == reflect.Bool }

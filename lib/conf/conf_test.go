package conf

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

type common struct {
	Site     string `conf:"site" default:"TNN-1" help:"site name"`
	LogLevel string `conf:"log-level" default:"info" help:"log level"`
}

type testConfig struct {
	common
	Addr     string        `conf:"addr" default:":7100" help:"listen address"`
	Workers  int           `conf:"workers" default:"2" help:"workers"`
	Tick     time.Duration `conf:"tick" default:"500ms" help:"tick"`
	Peers    []string      `conf:"peers" help:"peers"`
	Debug    bool          `conf:"debug" help:"debug"`
	Ratio    float64       `conf:"ratio" default:"0.3" help:"ratio"`
	Key      string        `conf:"key" secret:"true" help:"key"`
	Untagged string
}

func (c *testConfig) Validate() error {
	if c.Workers < 1 {
		return errors.New("workers must be at least 1")
	}
	return nil
}

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoadPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want func(*testConfig) string
	}{
		{"defaults", nil, nil, func(c *testConfig) string {
			return fmt.Sprintf("%s|%s|%d|%s|%g|%t", c.Site, c.Addr, c.Workers, c.Tick, c.Ratio, c.Debug)
		}},
		{"env overrides default", map[string]string{"SHINDO_INGEST_ADDR": ":9", "SHINDO_INGEST_SITE": "TYO-1"}, nil, func(c *testConfig) string {
			return c.Addr + c.Site
		}},
		{"flag overrides env", map[string]string{"SHINDO_INGEST_WORKERS": "5"}, []string{"-workers", "7", "-debug", "-peers", "a, b,,c"}, func(c *testConfig) string {
			return fmt.Sprintf("%d|%t|%s", c.Workers, c.Debug, strings.Join(c.Peers, "|"))
		}},
	}
	wants := []string{"TNN-1|:7100|2|500ms|0.3|false", ":9TYO-1", "7|true|a|b|c"}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var c testConfig
			if err := Load(&c, "INGEST", tt.args, Options{Env: envOf(tt.env)}); err != nil {
				t.Fatal(err)
			}
			if got := tt.want(&c); got != wants[i] {
				t.Fatalf("got %q, want %q", got, wants[i])
			}
		})
	}
}

func TestPresetActsAsDefault(t *testing.T) {
	t.Parallel()
	c := testConfig{Addr: ":7202"}
	if err := Load(&c, "RTS", nil, Options{Env: envOf(nil)}); err != nil {
		t.Fatal(err)
	}
	if c.Addr != ":7202" {
		t.Fatalf("preset overwritten: %q", c.Addr)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"unknown flag", nil, []string{"-nope"}, "flag provided but not defined: -nope"},
		{"bad int flag", nil, []string{"-workers", "x"}, `"x" is not an integer`},
		{"bad duration env", map[string]string{"SHINDO_INGEST_TICK": "fast"}, nil, `SHINDO_INGEST_TICK: "fast" is not a duration`},
		{"bad bool env", map[string]string{"SHINDO_INGEST_DEBUG": "maybe"}, nil, "SHINDO_INGEST_DEBUG"},
		{"validation", nil, []string{"-workers", "0"}, "invalid configuration: workers must be at least 1"},
		{"stray argument", nil, []string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var c testConfig
			err := Load(&c, "INGEST", tt.args, Options{Env: envOf(tt.env)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	var c testConfig
	var buf bytes.Buffer
	err := Load(&c, "INGEST", []string{"-h"}, Options{Env: envOf(nil), Help: &buf, Name: "shindo-ingest"})
	if !errors.Is(err, ErrHelp) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"Usage of shindo-ingest", "-addr", "SHINDO_INGEST_ADDR", "listen address"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestLogValueMasksSecrets(t *testing.T) {
	t.Parallel()
	c := testConfig{Key: "s3cret"}
	if err := Load(&c, "INGEST", nil, Options{Env: envOf(nil)}); err != nil {
		t.Fatal(err)
	}
	s := LogValue(&c).String()
	if strings.Contains(s, "s3cret") || !strings.Contains(s, "key=***") || !strings.Contains(s, "addr=:7100") {
		t.Fatalf("log value %s", s)
	}
}

func TestRejectsBadTarget(t *testing.T) {
	t.Parallel()
	if err := Load(testConfig{}, "X", nil, Options{}); err == nil {
		t.Fatal("non-pointer accepted")
	}
	type bad struct {
		C complex128 `conf:"c"`
	}
	if err := Load(&bad{}, "X", nil, Options{}); err == nil {
		t.Fatal("unsupported type accepted")
	}
}

// FuzzLoad feeds arbitrary flag values and environment values through the
// loader: it must return an error or a config, never panic.
func FuzzLoad(f *testing.F) {
	f.Add("-workers", "3", "SHINDO_F_TICK", "1s")
	f.Add("-tick", "-1h", "SHINDO_F_RATIO", "NaN")
	f.Add("--peers", ",,,", "SHINDO_F_DEBUG", "T")
	f.Add("-debug=", "", "SHINDO_F_WORKERS", "99999999999999999999")
	f.Fuzz(func(t *testing.T, flagName, flagValue, envName, envValue string) {
		var c testConfig
		_ = Load(&c, "F", []string{flagName, flagValue}, Options{Env: envOf(map[string]string{envName: envValue}), Help: &bytes.Buffer{}})
	})
}

type secretConfig struct {
	Token  string   `conf:"token" secret:"true" help:"token"`
	Tokens []string `conf:"tokens" secret:"true" help:"tokens"`
	Plain  string   `conf:"plain" help:"not a secret"`
}

// Secrets come from files so they stay out of argv; one given as a flag
// still works but is reported.
func TestSecretsFromFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	one := write("one", "s3cret-from-file\n")
	list := write("list", "aaaa\nbbbb\r\ncccc,dddd\n\n")
	big := write("big", strings.Repeat("x", maxSecretFile+1))

	var warned []string
	opts := func(env map[string]string) Options {
		return Options{Env: envOf(env), Warn: func(m string) { warned = append(warned, m) }}
	}
	var c secretConfig
	if err := Load(&c, "DATAAPI", []string{"-token-file", one, "-tokens-file", list}, opts(nil)); err != nil {
		t.Fatal(err)
	}
	if c.Token != "s3cret-from-file" || strings.Join(c.Tokens, "|") != "aaaa|bbbb|cccc|dddd" {
		t.Fatalf("from flags -…-file: token %q tokens %q", c.Token, c.Tokens)
	}
	c = secretConfig{}
	if err := Load(&c, "DATAAPI", nil, opts(map[string]string{"SHINDO_DATAAPI_TOKEN_FILE": one})); err != nil {
		t.Fatal(err)
	}
	if c.Token != "s3cret-from-file" {
		t.Fatalf("from SHINDO_DATAAPI_TOKEN_FILE: %q", c.Token)
	}
	if len(warned) != 0 {
		t.Fatalf("warned about secrets from files: %q", warned)
	}
	c = secretConfig{}
	if err := Load(&c, "DATAAPI", []string{"-token", "on-the-command-line", "-plain", "x"}, opts(nil)); err != nil {
		t.Fatal(err)
	}
	if c.Token != "on-the-command-line" || len(warned) != 1 || !strings.Contains(warned[0], "-token-file") {
		t.Fatalf("secret as a flag: token %q, warnings %q", c.Token, warned)
	}
	for _, args := range [][]string{{"-token-file", dir + "/missing"}, {"-token-file", big}, {"-plain-file", one}} {
		err := Load(&secretConfig{}, "DATAAPI", args, opts(nil))
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
	}
}

// Package e2e holds shindo's end-to-end tests and benchmarks. They run the
// built binaries (bin/, or $SHINDO_BIN) as separate processes through
// `shindo dev` and talk to them over the network only, as users do.
package e2e

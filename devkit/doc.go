// Package devkit holds the tooling that `shindo dev`, the load generators
// and the tests use, and that no service binary links: production code
// lives in lib/, and lib never imports devkit.
package devkit

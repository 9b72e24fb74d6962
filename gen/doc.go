// Package gen holds the Go code generated from proto/ by `make generate`.
// Nothing here is edited by hand; CI regenerates it and fails on any diff.
package gen

// Package e2e holds shindo's end-to-end tests and benchmarks. They run the
// built binaries (bin/, or $SHINDO_BIN) as separate processes through
// `shindo dev` and talk to them over the network only, as users do.
//
// Each test has a topology of its own, on a port plan of its own
// (harness_test.go, portPlans). Most run one after the other; the few that
// spend most of their time waiting on the system — an earthquake's report,
// failovers, partitions healing — and whose checks are of what arrived,
// not how fast, are marked t.Parallel and run beside each other (as many
// at a time as -parallel allows, GOMAXPROCS by default: two on our CI
// machine), once the rest have ended: TestAppsDuringAnEarthquake,
// TestMetadataFailover and TestCoresConverge (and TestCompose, which starts
// nothing). The chaos run, the WAN test and the tests that time the system
// keep the machine to themselves.
package e2e

package faultproxy

import (
	"math/rand/v2"
	"strconv"
	"time"
)

// Direction is the way traffic flows through a proxy.
type Direction int

const (
	// Upstream is client → target: station packets towards svc-ingest.
	Upstream Direction = iota
	// Downstream is target → client: acks towards the station.
	Downstream
)

func (d Direction) String() string {
	switch d {
	case Upstream:
		return "upstream"
	case Downstream:
		return "downstream"
	}
	return "Direction(" + strconv.Itoa(int(d)) + ")"
}

// check panics on a Direction other than Upstream or Downstream: that is a
// bug in the calling test, better named at the call than as an index out
// of range.
func (d Direction) check() {
	if d != Upstream && d != Downstream {
		panic("faultproxy: invalid " + d.String() + ", want Upstream or Downstream")
	}
}

// Impairment is what a proxy does to one direction of traffic. The zero
// value passes everything through untouched. Probabilities are in [0, 1]:
// 0 or less never happens, 1 or more always does. Negative durations count
// as zero.
type Impairment struct {
	// Drop is the probability a datagram is lost (UDP only).
	Drop float64
	// Delay is added to every datagram or chunk; nothing arrives sooner.
	Delay time.Duration
	// Jitter adds a uniform extra delay in [0, Jitter).
	Jitter time.Duration
	// Duplicate is the probability a datagram is sent twice (UDP only).
	Duplicate float64
	// Reorder is the probability a datagram is held back and released
	// after the next one of the same client, or after Options.MaxHold if
	// none comes (UDP only).
	Reorder float64
	// Blackhole loses every datagram (UDP) or holds every byte (TCP)
	// until cleared.
	Blackhole bool
}

// due is when something that arrived at now should go out, given a
// uniform variate r in [0, 1) for the jitter.
func (imp Impairment) due(now time.Time, r float64) time.Time {
	return now.Add(max(imp.Delay, 0) + time.Duration(r*float64(max(imp.Jitter, 0))))
}

// Options configure a proxy. The zero value is usable.
type Options struct {
	// Seed makes the random decisions repeatable; zero picks a seed at
	// random, which Seed() on the proxy reports so a failing test can log
	// it and be replayed.
	Seed uint64
	// KeepOrder stops delay and jitter from reordering UDP datagrams of
	// one client and direction: none overtakes one queued before it, even
	// after Set lowers the delay. Only Reorder then reorders. TCP always
	// keeps order.
	KeepOrder bool
	// MaxQueue caps the UDP datagrams waiting (delayed, held, or not yet
	// sent because the machine is busy) per direction; more are dropped
	// as overflow, as a router's full queue would. Default 1024.
	MaxQueue int
	// MaxFlows caps the UDP clients mapped at once; datagrams from more
	// clients are dropped as overflow. Default 1024.
	MaxFlows int
	// MaxHold is how long Reorder holds a datagram when no next one comes.
	// Default 50 ms, well inside a station's 250 ms ack timeout, so a held
	// packet reads as late rather than lost.
	MaxHold time.Duration
}

const (
	defaultMaxQueue = 1024
	defaultMaxFlows = 1024
	defaultMaxHold  = 50 * time.Millisecond
)

func (o Options) withDefaults() Options {
	if o.Seed == 0 {
		o.Seed = rand.Uint64() | 1 // never 0, so Seed() is always a replayable value
	}
	if o.MaxQueue <= 0 {
		o.MaxQueue = defaultMaxQueue
	}
	if o.MaxFlows <= 0 {
		o.MaxFlows = defaultMaxFlows
	}
	if o.MaxHold <= 0 {
		o.MaxHold = defaultMaxHold
	}
	return o
}

// newRand returns the generator for one stream of decisions; stream tells
// apart clients and directions under one seed.
func newRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream))
}

package witness

import (
	"hash/fnv"
	"math"

	"shindo.dev/seismo/measure"
)

// The witness's frames carry values that are a function of the station and
// the frame's time alone, so an archive's answer can be checked sample by
// sample without keeping what was sent, and a frame found in the wrong place
// can be named:
//
//   - ns[i] = (k mod 2^20)·25 + i, where k = first_sample_ms / 500 is the
//     frame's index since the epoch: it names the frame (to within six days,
//     more than the run and than the retention's use here) and the sample;
//   - ew[i] = tag − ns[i], where tag (24 bits of FNV-1a of the station ID)
//     tells the stations apart;
//   - ud[i] is a hash of (k, i, tag) in ±2048, so values that only look
//     right on two axes still fail.
//
// An intensity frame ending at window_end_ms = 500·k carries intensity
// −11 + (k mod 2^16)/8192 (in [−11, −3): within ingest's bounds, far below
// any alert), a PGA of (tag mod 2^12)/2^14 gal and a PGV of
// ((7k + tag) mod 2^12)/2^16 cm/s. Every one of them is exact in float32,
// and the archive keeps the float bits.
const (
	frameMs      = measure.FrameMs
	frameSamples = measure.FrameSamples
	rateHz       = measure.RateHz
	samplePeriod = 1000 / rateHz // ms
	// scaleGal is the witness's count size: the largest count, 2.6·10^7,
	// is 26 gal.
	scaleGal = float32(1e-6)
	// nsFrames is how many frame indexes ns tells apart (about six days).
	nsFrames = 1 << 20
	// intFrames is how many frame indexes the intensity tells apart.
	intFrames = 1 << 16
)

// stationTag is the station's share of its samples.
func stationTag(station string) int32 {
	h := fnv.New32a()
	h.Write([]byte(station))
	return int32(h.Sum32() & 0xFFFFFF)
}

// frameIndex is the index of the frame starting (sensor) or ending
// (intensity) at ms.
func frameIndex(ms int64) int64 { return ms / frameMs }

// sample returns the counts of sample i of the frame with index k.
func sample(tag int32, k int64, i int) (ns, ew, ud int32) {
	ns = int32(k%nsFrames)*frameSamples + int32(i)
	ew = tag - ns
	x := uint32(k)*2654435761 + uint32(i)*40503 + uint32(tag)*2246822519
	x ^= x >> 15
	x *= 2246822507
	ud = int32(x>>20) - 2048
	return ns, ew, ud
}

// sensorSamples returns the three axes of the station's frame whose first
// sample is at firstMs.
func sensorSamples(station string, firstMs int64) (ns, ew, ud []int32) {
	tag, k := stationTag(station), frameIndex(firstMs)
	ns, ew, ud = make([]int32, frameSamples), make([]int32, frameSamples), make([]int32, frameSamples)
	for i := range frameSamples {
		ns[i], ew[i], ud[i] = sample(tag, k, i)
	}
	return ns, ew, ud
}

// intensityValues returns the intensity, PGA (gal) and PGV (cm/s) of the
// station's frame ending at windowEndMs.
func intensityValues(station string, windowEndMs int64) (intensity, pga, pgv float32) {
	tag, k := int64(stationTag(station)), frameIndex(windowEndMs)
	intensity = -11 + float32(k%intFrames)/8192
	pga = float32(tag%4096) / (1 << 14)
	pgv = float32((7*k+tag)%4096) / (1 << 16)
	return intensity, pga, pgv
}

// nearestIndex returns the frame index nearest to near that is congruent
// to r modulo m.
func nearestIndex(near, r, m int64) int64 {
	k := near - ((near-r)%m+m)%m // the largest ≤ near
	if near-k > m/2 {
		k += m
	}
	return k
}

// sensorOrigin names the frame of this station whose samples a slot holds
// (its first_sample_ms), judging by the samples present (have[i]); false
// if they are not, all of them, samples of one frame of this station.
// slotMs, where they were found, picks among frames six days apart.
func sensorOrigin(station string, slotMs int64, have *[frameSamples]bool, ns, ew, ud *[frameSamples]int32) (int64, bool) {
	first := -1
	for i := range frameSamples {
		if have[i] {
			first = i
			break
		}
	}
	if first < 0 || ns[first] < 0 || int(ns[first]%frameSamples) != first {
		return 0, false
	}
	tag := stationTag(station)
	k := nearestIndex(frameIndex(slotMs), int64(ns[first]/frameSamples), nsFrames)
	for i := range frameSamples {
		if !have[i] {
			continue
		}
		if n, e, u := sample(tag, k, i); ns[i] != n || ew[i] != e || ud[i] != u {
			return 0, false
		}
	}
	return k * frameMs, true
}

// intensityOrigin names the frame of this station (its window_end_ms) that
// an intensity sample holds; false if it is none of this station's.
func intensityOrigin(station string, slotMs int64, intensity, pga, pgv float32) (int64, bool) {
	r := float64(intensity+11) * 8192
	if math.IsNaN(r) || r < 0 || r >= intFrames || r != math.Trunc(r) {
		return 0, false
	}
	end := nearestIndex(frameIndex(slotMs), int64(r), intFrames) * frameMs
	if i, a, v := intensityValues(station, end); i != intensity || a != pga || v != pgv {
		return 0, false
	}
	return end, true
}

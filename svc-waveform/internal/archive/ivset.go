package archive

import "sort"

// span is the half-open range [lo, hi) of sample indexes.
type span struct{ lo, hi int64 }

// ivset is a set of sample indexes kept as sorted, disjoint, non-adjacent
// spans: a channel's coverage is one span per stretch without gaps, so it
// stays tiny however much data it describes.
type ivset struct{ s []span }

// find returns the index of the first span whose hi is at or after x.
func (v *ivset) find(x int64) int {
	// Data mostly arrives at the end: check the last span first.
	if n := len(v.s); n == 0 || v.s[n-1].hi < x {
		return n
	}
	return sort.Search(len(v.s), func(i int) bool { return v.s[i].hi >= x })
}

// add inserts [lo, hi), merging what it touches.
func (v *ivset) add(lo, hi int64) {
	if lo >= hi {
		return
	}
	i := v.find(lo)
	if i == len(v.s) {
		v.s = append(v.s, span{lo, hi})
		return
	}
	// Spans i..j-1 overlap or touch [lo, hi).
	j := i
	for j < len(v.s) && v.s[j].lo <= hi {
		lo = min(lo, v.s[j].lo)
		hi = max(hi, v.s[j].hi)
		j++
	}
	if i == j {
		v.s = append(v.s, span{})
		copy(v.s[i+1:], v.s[i:])
		v.s[i] = span{lo, hi}
		return
	}
	v.s[i] = span{lo, hi}
	v.s = append(v.s[:i+1], v.s[j:]...)
}

// gaps calls fn for each part of [lo, hi) not in the set, in order.
func (v *ivset) gaps(lo, hi int64, fn func(a, b int64)) {
	for i := v.find(lo + 1); lo < hi; i++ {
		if i >= len(v.s) || v.s[i].lo >= hi {
			fn(lo, hi)
			return
		}
		if v.s[i].lo > lo {
			fn(lo, v.s[i].lo)
		}
		lo = max(lo, v.s[i].hi)
	}
}

// contains reports whether x is in the set.
func (v *ivset) contains(x int64) bool {
	i := v.find(x + 1)
	return i < len(v.s) && v.s[i].lo <= x
}

// trimBelow removes everything below x.
func (v *ivset) trimBelow(x int64) {
	i := 0
	for i < len(v.s) && v.s[i].hi <= x {
		i++
	}
	v.s = v.s[i:]
	if len(v.s) > 0 && v.s[0].lo < x {
		v.s[0].lo = x
	}
}

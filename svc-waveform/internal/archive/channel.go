package archive

// mark says that the samples of a run up to end (an offset into x,
// exclusive) and after the previous mark came from WAL segment seg, so
// the segment is kept until they are in records.
type mark struct {
	end int
	seg uint64
}

// run is a contiguous stretch of a channel's samples that are not in a
// record yet. For the intensity channels the samples are float32 bits.
type run struct {
	start int64 // sample index of x[0]
	x     []int32
	marks []mark
	last  int64 // store clock (Unix ms) of the latest insert, for the time bound
}

func (r *run) end() int64 { return r.start + int64(len(r.x)) }

func (r *run) appendSamples(x []int32, seg uint64, now int64) {
	r.x = append(r.x, x...)
	if n := len(r.marks); n > 0 && r.marks[n-1].seg == seg {
		r.marks[n-1].end = len(r.x)
	} else {
		r.marks = append(r.marks, mark{len(r.x), seg})
	}
	r.last = max(r.last, now)
}

func (r *run) prependSamples(x []int32, seg uint64, now int64) {
	n := len(x)
	r.x = append(r.x, x...) // grow
	copy(r.x[n:], r.x[:len(r.x)-n])
	copy(r.x, x)
	for i := range r.marks {
		r.marks[i].end += n
	}
	r.marks = append([]mark{{n, seg}}, r.marks...)
	r.start -= int64(n)
	r.last = max(r.last, now)
}

// absorb appends next, which starts where r ends.
func (r *run) absorb(next *run) {
	off := len(r.x)
	r.x = append(r.x, next.x...)
	for _, m := range next.marks {
		r.marks = append(r.marks, mark{m.end + off, m.seg})
	}
	r.last = max(r.last, next.last)
}

// consume drops the first n samples, which went into a record.
func (r *run) consume(n int) {
	copy(r.x, r.x[n:])
	r.x = r.x[:len(r.x)-n]
	r.start += int64(n)
	i := 0
	for i < len(r.marks) && r.marks[i].end <= n {
		i++
	}
	r.marks = append(r.marks[:0], r.marks[i:]...)
	for j := range r.marks {
		r.marks[j].end -= n
	}
}

// minSeg is the oldest WAL segment the run's samples came from.
func (r *run) minSeg() uint64 {
	m := ^uint64(0)
	for _, k := range r.marks {
		m = min(m, k.seg)
	}
	return m
}

// channel is one archived channel of a station.
type channel struct {
	kind *chanKind
	// cov is every sample index the archive holds (records and runs);
	// stored only those in records, which is what a checkpoint saves.
	cov, stored ivset
	runs        []*run // sorted by start, neither overlapping nor touching
	pending     []*pendingRecord
	files       map[int64]*dayFile
}

// insert adds samples x at index lo (they must not be covered yet) and
// returns the run that holds them.
func (c *channel) insert(lo int64, x []int32, seg uint64, now int64) *run {
	hi := lo + int64(len(x))
	c.cov.add(lo, hi)
	for i, r := range c.runs {
		switch {
		case r.end() == lo:
			r.appendSamples(x, seg, now)
			if i+1 < len(c.runs) && c.runs[i+1].start == r.end() {
				r.absorb(c.runs[i+1])
				c.runs = append(c.runs[:i+1], c.runs[i+2:]...)
			}
			return r
		case r.start == hi:
			r.prependSamples(x, seg, now)
			return r
		case r.start > hi:
			nr := &run{start: lo}
			nr.appendSamples(x, seg, now)
			c.runs = append(c.runs, nil)
			copy(c.runs[i+1:], c.runs[i:])
			c.runs[i] = nr
			return nr
		}
	}
	nr := &run{start: lo}
	nr.appendSamples(x, seg, now)
	c.runs = append(c.runs, nr)
	return nr
}

// dropRun removes an emptied run.
func (c *channel) dropRun(r *run) {
	for i, x := range c.runs {
		if x == r {
			c.runs = append(c.runs[:i], c.runs[i+1:]...)
			return
		}
	}
}

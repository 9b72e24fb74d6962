package compat

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"time"

	"shindo.dev/lib/metadb"
)

// Report list defaults and bounds.
const (
	DefaultLimit = 50
	MaxLimit     = metadb.MaxPage
)

// reportSorts are the values of sort=, as DPIP names them
// (lib/features/earthquake/presentation/widgets/report_filter_sheet.dart:111-116).
var reportSorts = map[string]metadb.ReportSort{
	"time": metadb.SortTime, "intensity": metadb.SortLevel,
	"magnitude": metadb.SortMagnitude, "depth": metadb.SortDepth,
}

// ParseReportQuery turns the query of GET /api/v2/eq/report into a
// filter. Parameters (all optional; unknown ones are ignored):
//
//	limit                      reports per page, 1–500 (50)
//	page                       page number from 1 (1)
//	minIntensity, maxIntensity highest level, 0–9
//	minMagnitude, maxMagnitude magnitude, −5–12
//	minDepth, maxDepth         depth, km, 0–1000
//	startTime, endTime         origin time, Unix ms, or a day YYYY-MM-DD in
//	                           Taiwan time, inclusive: from its 00:00 to
//	                           its end (DPIP sends days:
//	                           lib/features/earthquake/presentation/widgets/report_filter_sheet.dart:153-168
//	                           of ExpTechTW/DPIP at 194d28f)
//	sort                       time (default), intensity, magnitude, depth
//	order                      desc (default), asc
//
// A known parameter given twice, empty, malformed or out of range is an
// error, as is a range whose minimum exceeds its maximum.
func ParseReportQuery(q url.Values) (metadb.ReportFilter, error) {
	f := metadb.ReportFilter{Limit: DefaultLimit}
	var errs error
	one := func(name string) (string, bool) {
		vs, ok := q[name]
		switch {
		case !ok:
			return "", false
		case len(vs) != 1:
			errs = fmt.Errorf("%s: given %d times", name, len(vs))
			return "", false
		case vs[0] == "":
			errs = fmt.Errorf("%s: empty", name)
			return "", false
		}
		return vs[0], true
	}
	integer := func(name string, lo, hi int64) *int64 {
		s, ok := one(name)
		if !ok || errs != nil {
			return nil
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < lo || v > hi {
			errs = fmt.Errorf("%s: an integer from %d to %d", name, lo, hi)
			return nil
		}
		return &v
	}
	number := func(name string, lo, hi float64) *float64 {
		s, ok := one(name)
		if !ok || errs != nil {
			return nil
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || v < lo || v > hi {
			errs = fmt.Errorf("%s: a number from %g to %g", name, lo, hi)
			return nil
		}
		return &v
	}
	level := func(name string) *int {
		v := integer(name, 0, metadb.MaxLevel)
		if v == nil {
			return nil
		}
		l := int(*v)
		return &l
	}

	if v := integer("limit", 1, MaxLimit); v != nil {
		f.Limit = int(*v)
	}
	page := integer("page", 1, math.MaxInt32)
	f.MinLevel, f.MaxLevel = level("minIntensity"), level("maxIntensity")
	f.MinMagnitude, f.MaxMagnitude = number("minMagnitude", -5, 12), number("maxMagnitude", -5, 12)
	f.MinDepthKm, f.MaxDepthKm = number("minDepth", 0, 1000), number("maxDepth", 0, 1000)
	timeOrDay := func(name string, end bool) *int64 {
		s, ok := one(name)
		if !ok || errs != nil {
			return nil
		}
		if len(s) == len("2006-01-02") && s[4] == '-' {
			day, err := time.ParseInLocation("2006-01-02", s, taiwan)
			if err != nil {
				errs = fmt.Errorf("%s: Unix ms or a day YYYY-MM-DD", name)
				return nil
			}
			if end {
				day = day.AddDate(0, 0, 1).Add(-time.Millisecond)
			}
			ms := day.UnixMilli()
			if ms < 0 || ms > metadb.MaxTimeMs {
				errs = fmt.Errorf("%s: a day from 1970-01-01 to 9999-12-31", name)
				return nil
			}
			return &ms
		}
		return integer(name, 0, metadb.MaxTimeMs)
	}
	f.FromMs, f.ToMs = timeOrDay("startTime", false), timeOrDay("endTime", true)
	if v, ok := one("sort"); ok && errs == nil {
		sort, known := reportSorts[v]
		if !known {
			errs = fmt.Errorf("sort: one of time, intensity, magnitude, depth")
		}
		f.Sort = sort
	}
	if v, ok := one("order"); ok && errs == nil {
		switch v {
		case "asc":
			f.Ascending = true
		case "desc":
		default:
			errs = fmt.Errorf("order: asc or desc")
		}
	}
	if errs != nil {
		return metadb.ReportFilter{}, errs
	}
	if page != nil {
		offset := (*page - 1) * int64(f.Limit)
		if offset > metadb.MaxOffset {
			return metadb.ReportFilter{}, fmt.Errorf("page: at most %d reports deep", metadb.MaxOffset)
		}
		f.Offset = int(offset)
	}
	switch {
	case f.MinLevel != nil && f.MaxLevel != nil && *f.MinLevel > *f.MaxLevel:
		return metadb.ReportFilter{}, fmt.Errorf("minIntensity above maxIntensity")
	case f.MinMagnitude != nil && f.MaxMagnitude != nil && *f.MinMagnitude > *f.MaxMagnitude:
		return metadb.ReportFilter{}, fmt.Errorf("minMagnitude above maxMagnitude")
	case f.MinDepthKm != nil && f.MaxDepthKm != nil && *f.MinDepthKm > *f.MaxDepthKm:
		return metadb.ReportFilter{}, fmt.Errorf("minDepth above maxDepth")
	case f.FromMs != nil && f.ToMs != nil && *f.FromMs > *f.ToMs:
		return metadb.ReportFilter{}, fmt.Errorf("startTime after endTime")
	}
	return f, nil
}

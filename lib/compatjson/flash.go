package compatjson

import (
	"strconv"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
)

// Intensity renders the intensity flash of detections as the body of GET
// /api/v2/trem/intensity, an array with one entry per detection that lit
// a township, as TREM-Lite reads it (src/js/index/data/data.js:449-509 of
// ExpTechTW/TREM-Lite at 9bbaccf; packages/core/src/features/data/data.ts
// of the TypeScript rewrite):
//
//	[{"author":"trem","id":ms,"serial":n,"final":0,"max":l,
//	  "area":{"<level>":[code,…],…}}]
//
// id is the detection's first trigger, Unix ms: the apps take it as the
// event's time (and expire the flash 10 minutes after it); serial grows
// with every change of the areas; area lists the townships by level,
// codes ascending; max is the highest level. The last entry of a detection
// (final 1) also carries "IntensityEnd":1, TREM-Lite's end marker. No
// flash gives [].
func Intensity(author string, ds []*rtsv1.Detection) []byte {
	b := []byte{'['}
	n := 0
	for _, d := range ds {
		areas := d.GetAreas()
		if len(areas) == 0 {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"author":`...)
		b = appendString(b, author)
		b = append(b, `,"id":`...)
		b = strconv.AppendInt(b, d.GetFirstTriggerMs(), 10)
		b = append(b, `,"serial":`...)
		b = strconv.AppendUint(b, uint64(d.GetAreaSerial()), 10)
		b = append(b, `,"final":`...)
		b = appendFlag(b, d.GetFinal())
		var top uint32
		for _, a := range areas {
			top = max(top, a.GetLevel())
		}
		b = append(b, `,"max":`...)
		b = strconv.AppendUint(b, uint64(top), 10)
		b = append(b, `,"area":`...)
		b = appendAreasByLevel(b, areas)
		if d.GetFinal() {
			b = append(b, `,"IntensityEnd":1`...)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// LPGM renders the long-period ground motion of detections as the body of
// GET /api/v2/trem/lpgm, an array with one entry per detection in which a
// station reached class 1, as TREM-Lite reads it
// (src/js/index/data/data.js:511-556 of ExpTechTW/TREM-Lite at 9bbaccf):
//
//	[{"author":"trem","id":ms,"final":0,"max":c,
//	  "list":[{"id":"<station>","lpgm":c,"sva":f},…]}]
//
// id is the detection's first trigger, Unix ms; list has the stations by
// ID with their highest class (1–4) and the absolute velocity response
// that gave it, cm/s (sva, which the apps do not read). No long-period
// motion gives [].
func LPGM(author string, ds []*rtsv1.Detection) []byte {
	b := []byte{'['}
	n := 0
	for _, d := range ds {
		list := d.GetLpgm()
		if len(list) == 0 {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"author":`...)
		b = appendString(b, author)
		b = append(b, `,"id":`...)
		b = strconv.AppendInt(b, d.GetFirstTriggerMs(), 10)
		b = append(b, `,"final":`...)
		b = appendFlag(b, d.GetFinal())
		var top uint32
		for _, l := range list {
			top = max(top, l.GetLevel())
		}
		b = append(b, `,"max":`...)
		b = strconv.AppendUint(b, uint64(top), 10)
		b = append(b, `,"list":[`...)
		for i, l := range list {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendString(b, l.GetStationId())
			b = append(b, `,"lpgm":`...)
			b = strconv.AppendUint(b, uint64(l.GetLevel()), 10)
			b = append(b, `,"sva":`...)
			b = appendFloat(b, l.GetSvaCms(), 1)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	return append(b, ']')
}

// appendFlag writes a flag as the apps read one: the number 1 or 0.
func appendFlag(b []byte, v bool) []byte {
	if v {
		return append(b, '1')
	}
	return append(b, '0')
}

// appendAreasByLevel writes areas as an object of level → codes, highest
// level first, codes ascending: {"6":[974],"5":[970,975]}.
func appendAreasByLevel(b []byte, areas []*rtsv1.AreaLevel) []byte {
	b = append(b, '{')
	first := true
	for level := uint32(9); level >= 1; level-- {
		opened := false
		for _, a := range areas { // by code
			if a.GetLevel() != level {
				continue
			}
			if opened {
				b = append(b, ',')
			} else {
				if !first {
					b = append(b, ',')
				}
				first, opened = false, true
				b = append(b, '"')
				b = strconv.AppendUint(b, uint64(level), 10)
				b = append(b, `":[`...)
			}
			b = strconv.AppendUint(b, uint64(a.GetCode()), 10)
		}
		if opened {
			b = append(b, ']')
		}
	}
	return append(b, '}')
}

// Package detectpb converts the detector's values (package detect) to
// their rts.v1 messages and back: published detections, and the whole
// state a core adopts from its peer.
package detectpb

import (
	"math"

	rtsv1 "shindo.dev/gen/shindo/rts/v1"
	stationv1 "shindo.dev/gen/shindo/station/v1"
	"shindo.dev/svc-rts/internal/detect"
)

// Detection is d as published.
func Detection(d detect.Detection) *rtsv1.Detection {
	pd := &rtsv1.Detection{
		Id: d.ID, Serial: d.Serial, Final: d.Final,
		OriginTimeMs: d.OriginMs, Lat: d.Lat, Lon: d.Lon, DepthKm: d.DepthKm, Magnitude: d.Mag,
		Location: d.Loc, LocationCode: d.LocCode, MaxLevel: d.MaxLevel,
		FirstTriggerMs: d.FirstTriggerMs, UpdatedMs: d.UpdatedMs, Stations: uint32(d.Stations),
	}
	if f := d.Flash; f != nil {
		pd.AreaSerial = f.Serial
		for _, a := range f.Areas {
			pd.Areas = append(pd.Areas, &rtsv1.AreaLevel{Code: a.Code, Level: a.Level})
		}
		for _, l := range f.LPGM {
			pd.Lpgm = append(pd.Lpgm, &rtsv1.StationLPGM{StationId: l.Station, Level: l.Level, SvaCms: l.SvaCms})
		}
	}
	return pd
}

// FromDetection is the inverse of Detection. A detection with no areas, no
// long-period stations and area serial 0 has no flash. Stations beyond the
// saved bounds are cut to them; detect.Restore checks the rest.
func FromDetection(pd *rtsv1.Detection) detect.Detection {
	d := detect.Detection{
		ID: pd.GetId(), Serial: pd.GetSerial(), Final: pd.GetFinal(),
		OriginMs: pd.GetOriginTimeMs(), Lat: pd.GetLat(), Lon: pd.GetLon(), DepthKm: pd.GetDepthKm(), Mag: pd.GetMagnitude(),
		Loc: pd.GetLocation(), LocCode: pd.GetLocationCode(), MaxLevel: pd.GetMaxLevel(),
		FirstTriggerMs: pd.GetFirstTriggerMs(), UpdatedMs: pd.GetUpdatedMs(), Stations: int(min(pd.GetStations(), detect.MaxSavedStations)),
	}
	if len(pd.GetAreas()) == 0 && len(pd.GetLpgm()) == 0 && pd.GetAreaSerial() == 0 {
		return d
	}
	f := &detect.Flash{Serial: pd.GetAreaSerial()}
	if n := len(pd.GetAreas()); n > 0 {
		f.Areas = make([]detect.AreaLevel, n)
		for i, a := range pd.GetAreas() {
			f.Areas[i] = detect.AreaLevel{Code: a.GetCode(), Level: a.GetLevel()}
		}
	}
	if n := len(pd.GetLpgm()); n > 0 {
		f.LPGM = make([]detect.StationLPGM, n)
		for i, l := range pd.GetLpgm() {
			f.LPGM[i] = detect.StationLPGM{Station: l.GetStationId(), Level: l.GetLevel(), SvaCms: l.GetSvaCms()}
		}
	}
	d.Flash = f
	return d
}

// State is v as a message.
func State(v detect.Saved) *rtsv1.DetectorState {
	pb := &rtsv1.DetectorState{
		Picks:  make([]*rtsv1.DetectorPick, len(v.Picks)),
		Events: make([]*rtsv1.DetectorEvent, len(v.Events)),
	}
	for i, p := range v.Picks {
		pb.Picks[i] = &rtsv1.DetectorPick{StationId: p.Station, OnsetMs: p.OnsetMs, DetectionId: p.Event, Consumed: p.Consumed}
	}
	for i, e := range v.Events {
		pe := &rtsv1.DetectorEvent{
			Published: Detection(e.Pub), LastTriggeredMs: e.LastTriggeredMs, FinalAtMs: e.FinalAtMs, Stale: e.Stale,
			Members:    make([]*rtsv1.DetectorMember, len(e.Members)),
			LongPeriod: make([]*rtsv1.DetectorStationSva, len(e.LongPeriod)),
		}
		for j, m := range e.Members {
			pe.Members[j] = &rtsv1.DetectorMember{StationId: m.Station, Lat: m.Lat, Lon: m.Lon, Code: m.Code, OnsetMs: m.OnsetMs, Peak: m.Peak, PWave: PWave(m.P)}
		}
		for j, l := range e.LongPeriod {
			pe.LongPeriod[j] = &rtsv1.DetectorStationSva{StationId: l.Station, SvaCms: l.SvaCms}
		}
		pb.Events[i] = pe
	}
	return pb
}

// FromState is the inverse of State; detect.Restore checks what it gives.
func FromState(pb *rtsv1.DetectorState) detect.Saved {
	v := detect.Saved{Picks: make([]detect.SavedPick, len(pb.GetPicks())), Events: make([]detect.SavedEvent, len(pb.GetEvents()))}
	for i, p := range pb.GetPicks() {
		v.Picks[i] = detect.SavedPick{Station: p.GetStationId(), OnsetMs: p.GetOnsetMs(), Event: p.GetDetectionId(), Consumed: p.GetConsumed()}
	}
	for i, pe := range pb.GetEvents() {
		e := detect.SavedEvent{
			Pub: FromDetection(pe.GetPublished()), LastTriggeredMs: pe.GetLastTriggeredMs(), FinalAtMs: pe.GetFinalAtMs(), Stale: pe.GetStale(),
			Members:    make([]detect.SavedMember, len(pe.GetMembers())),
			LongPeriod: make([]detect.StationSva, len(pe.GetLongPeriod())),
		}
		for j, m := range pe.GetMembers() {
			e.Members[j] = detect.SavedMember{Station: m.GetStationId(), Lat: m.GetLat(), Lon: m.GetLon(), Code: m.GetCode(), OnsetMs: m.GetOnsetMs(), Peak: m.GetPeak(), P: FromPWave(m.GetPWave())}
		}
		for j, l := range pe.GetLongPeriod() {
			e.LongPeriod[j] = detect.StationSva{Station: l.GetStationId(), SvaCms: l.GetSvaCms()}
		}
		v.Events[i] = e
	}
	return v
}

// PWave is a station's P-wave measurement as a message; nil for none.
func PWave(w detect.PWave) *stationv1.PWave {
	if w.OnsetMs == 0 {
		return nil
	}
	return &stationv1.PWave{OnsetMs: w.OnsetMs, WindowMs: uint32(max(w.WindowMs, 0)), PdCm: w.PdCm, TaucS: w.TauCS}
}

// FromPWave is the inverse of PWave; a window too long to be one reads as
// none of the relations' (detect.Restore refuses it).
func FromPWave(pb *stationv1.PWave) detect.PWave {
	if pb == nil {
		return detect.PWave{}
	}
	return detect.PWave{OnsetMs: pb.GetOnsetMs(), WindowMs: int32(min(pb.GetWindowMs(), math.MaxInt32)), PdCm: pb.GetPdCm(), TauCS: pb.GetTaucS()}
}

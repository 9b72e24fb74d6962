package httpapi

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	datav1 "shindo.dev/gen/shindo/data/v1"
)

// TestFastJSONMatchesProtojson: the hand-written answers are the JSON
// protojson gives for the same messages.
func TestFastJSONMatchesProtojson(t *testing.T) {
	t.Parallel()
	odd := "\"quote\" \\ back\n\t\x01 <html> & 震度 \u2028 \U0001F4A5"
	r := &datav1.Report{Id: "113000-2024-0403-075809", TimeMs: 1712102289000, Lat: 23.77, Lon: -121.67, DepthKm: 1e-7,
		Magnitude: 1e22, Location: odd, MaxLevel: 7, Areas: []*datav1.ReportArea{{Code: 970, Level: 7}, {Code: 100}},
		Md5: "ac7e8a9c1744a7777380d1a2b120106f", SourceDetectionId: "1712102289000-18", TremMs: -1, CreatedMs: math.MaxInt64}
	d := &datav1.Detection{Id: odd, Serial: math.MaxUint32, Final: true, OriginTimeMs: 1, Lat: math.Inf(1), Lon: math.NaN(),
		DepthKm: math.Copysign(0, -1), Magnitude: 0.1 + 0.2, Location: "x", LocationCode: 970, MaxLevel: 9, FirstTriggerMs: math.MinInt64, Stations: 3}
	marshaler := &FastJSON{JSONPb: runtimeJSON()}
	for _, m := range []proto.Message{
		&datav1.ListReportsResponse{Reports: []*datav1.Report{r, {}}, NextPageToken: "AXI"},
		&datav1.ListReportsResponse{},
		&datav1.GetReportResponse{Report: r},
		&datav1.GetReportResponse{},
		&datav1.ListDetectionsResponse{Detections: []*datav1.Detection{d, {}}},
		&datav1.GetDetectionResponse{Detection: d},
		&datav1.GetDetectionResponse{},
	} {
		fast, err := marshaler.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		slow, err := marshaler.JSONPb.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := json.Unmarshal(fast, &a); err != nil {
			t.Fatalf("%T: invalid JSON %s", m, fast)
		}
		json.Unmarshal(slow, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%T:\nfast %s\nslow %s", m, fast, slow)
		}
		back := m.ProtoReflect().New().Interface()
		if err := protojson.Unmarshal(fast, back); err != nil {
			t.Errorf("%T: protojson cannot read %s: %v", m, fast, err)
		}
	}
	if b, _ := marshaler.Marshal(&datav1.ListStationsResponse{}); string(b) == "" {
		t.Fatal("other messages not marshalled")
	}
}

func runtimeJSON() runtime.JSONPb {
	return runtime.JSONPb{MarshalOptions: protojson.MarshalOptions{UseProtoNames: true, EmitDefaultValues: true}}
}

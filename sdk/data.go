package sdk

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	datav1 "shindo.dev/gen/shindo/data/v1"
)

// The data API's routes (/v1/...), typed on the messages of proto/ (the
// generated shindo.dev/gen): answers are decoded with protojson from the
// JSON the gateways send (proto names, 64-bit integers as strings). Fields
// the client does not know are skipped, so a client keeps working with a
// newer server that added some; the server's contract test
// (e2e/contract_test.go) is what holds the names it sends to proto/.
var decode = protojson.UnmarshalOptions{DiscardUnknown: true}

func (c *Client) getProto(ctx context.Context, path string, q url.Values, out proto.Message) error {
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	b, err := c.Do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if err := decode.Unmarshal(b, out); err != nil {
		return fmt.Errorf("sdk: decode %s: %w", path, err)
	}
	return nil
}

// Stations lists the stations, of network net if not empty.
func (c *Client) Stations(ctx context.Context, net string) ([]*datav1.Station, error) {
	q := url.Values{}
	if net != "" {
		q.Set("net", net)
	}
	var out datav1.ListStationsResponse
	err := c.getProto(ctx, "/v1/stations", q, &out)
	return out.GetStations(), err
}

// Reports returns a page of earthquake reports matching req, newest first,
// and the token of the next page ("" on the last).
func (c *Client) Reports(ctx context.Context, req *datav1.ListReportsRequest) ([]*datav1.Report, string, error) {
	q := url.Values{}
	setInt := func(k string, v *int64) {
		if v != nil {
			q.Set(k, strconv.FormatInt(*v, 10))
		}
	}
	setFloat := func(k string, v *float64) {
		if v != nil {
			q.Set(k, strconv.FormatFloat(*v, 'g', -1, 64))
		}
	}
	setInt("start_time_ms", req.StartTimeMs)
	setInt("end_time_ms", req.EndTimeMs)
	setFloat("min_magnitude", req.MinMagnitude)
	if req.MinLevel != nil {
		q.Set("min_level", strconv.FormatUint(uint64(*req.MinLevel), 10))
	}
	setFloat("min_lat", req.MinLat)
	setFloat("max_lat", req.MaxLat)
	setFloat("min_lon", req.MinLon)
	setFloat("max_lon", req.MaxLon)
	if req.GetPageSize() > 0 {
		q.Set("page_size", strconv.FormatUint(uint64(req.GetPageSize()), 10))
	}
	if req.GetPageToken() != "" {
		q.Set("page_token", req.GetPageToken())
	}
	var out datav1.ListReportsResponse
	err := c.getProto(ctx, "/v1/reports", q, &out)
	return out.GetReports(), out.GetNextPageToken(), err
}

// Report returns one report.
func (c *Client) Report(ctx context.Context, id string) (*datav1.Report, error) {
	var out datav1.GetReportResponse
	err := c.getProto(ctx, "/v1/reports/"+url.PathEscape(id), nil, &out)
	return out.GetReport(), err
}

// Detections returns a page of detections matching req, newest first, and
// the token of the next page ("" on the last).
func (c *Client) Detections(ctx context.Context, req *datav1.ListDetectionsRequest) ([]*datav1.Detection, string, error) {
	q := url.Values{}
	if req.GetActiveOnly() {
		q.Set("active_only", "true")
	}
	if req.SinceMs != nil {
		q.Set("since_ms", strconv.FormatInt(*req.SinceMs, 10))
	}
	if req.GetPageSize() > 0 {
		q.Set("page_size", strconv.FormatUint(uint64(req.GetPageSize()), 10))
	}
	if req.GetPageToken() != "" {
		q.Set("page_token", req.GetPageToken())
	}
	var out datav1.ListDetectionsResponse
	err := c.getProto(ctx, "/v1/detections", q, &out)
	return out.GetDetections(), out.GetNextPageToken(), err
}

// Detection returns one detection.
func (c *Client) Detection(ctx context.Context, id string) (*datav1.Detection, error) {
	var out datav1.GetDetectionResponse
	err := c.getProto(ctx, "/v1/detections/"+url.PathEscape(id), nil, &out)
	return out.GetDetection(), err
}

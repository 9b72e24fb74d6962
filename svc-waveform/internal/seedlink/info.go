package seedlink

import (
	"encoding/binary"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"shindo.dev/seismo/mseed"
)

// Capabilities this server announces in HELLO (after "::") and INFO:
// protocol 4's tokens in its JSON, and protocol 3's names in its XML —
// those ringserver lists there (src/infoxml.c, info_xml_slv3_capabilities)
// less info:connections, which protocol 3 is refused here. ObsPy's
// EasySeedLinkClient reads the XML and selects streams only from a server
// that names "multistation" (obspy/clients/seedlink/easyseedlink.py,
// select_stream).
const (
	helloCapabilities = "SLPROTO:4.0 SLPROTO:3.1 CAP WS:13"
	infoCapabilities  = "SLPROTO:4.0 SLPROTO:3.1 TIME WS:13"
	infoCapabilities3 = "dialup multistation window-extraction info:id info:capabilities info:stations info:streams"
)

// info answers INFO level [station [stream]]: JSON in an "SE" packet for
// protocol 4, XML in ASCII miniSEED records ("SLINFO") for protocol 3, as
// ringserver and SeisComP's seedlink answer.
func (s *session) info(args []string) error {
	if len(args) == 0 || len(args) > 3 {
		return s.infoError("ARGUMENTS", "INFO requires a level, and at most a station and a stream pattern")
	}
	level := strings.ToUpper(args[0])
	var wants func(StationKey) bool
	if len(args) >= 2 {
		p, err := stationPattern(4, args[1:2])
		if err != nil {
			return s.infoError("ARGUMENTS", err.Error())
		}
		wants = func(k StationKey) bool { return matchStation(p, k) }
	}
	var sels []selector
	if len(args) == 3 {
		sel, err := parseSelector(4, args[2])
		if err != nil {
			return s.infoError("ARGUMENTS", err.Error())
		}
		sels = []selector{sel}
	}
	switch level {
	case "ID", "CAPABILITIES", "FORMATS":
	case "STATIONS", "STREAMS":
	case "CONNECTIONS":
		// The clients' addresses are theirs: listed to trusted callers
		// only, as ringserver does (the operators', under mutual TLS).
		if s.conn == nil || s.srv.opts.Trusted == nil || !s.srv.opts.Trusted(s.conn) {
			return s.infoError("UNAUTHORIZED", "connections are listed to trusted clients only")
		}
		if s.proto != 4 {
			return s.infoError("UNSUPPORTED", "connections are listed in protocol 4's JSON")
		}
	default:
		return s.infoError("ARGUMENTS", "unrecognized INFO item")
	}
	if s.proto == 4 {
		return s.infoJSON(level, wants, sels)
	}
	return s.infoXML(level, wants, sels)
}

type jsonInfo struct {
	Software     string            `json:"software"`
	Organization string            `json:"organization"`
	Capability   []string          `json:"capability,omitempty"`
	Format       map[string]any    `json:"format,omitempty"`
	Filter       map[string]string `json:"filter,omitempty"`
	Station      []jsonStation     `json:"station,omitempty"`
	Connections  *jsonConnections  `json:"connections,omitempty"`
	Error        *jsonError        `json:"error,omitempty"`
}

// jsonConnections is INFO CONNECTIONS, in the fields of ringserver's
// (src/infojson.c) that this server has.
type jsonConnections struct {
	ClientCount int          `json:"client_count"`
	Client      []jsonClient `json:"client"`
}

type jsonClient struct {
	Host            string        `json:"host"`
	IPAddress       string        `json:"ip_address"`
	ClientPort      string        `json:"client_port"`
	Type            string        `json:"type"`
	ClientID        string        `json:"client_id,omitempty"`
	ConnectTime     string        `json:"connect_time"`
	TransmitPackets uint64        `json:"transmit_packets"`
	TransmitBytes   uint64        `json:"transmit_bytes"`
	ProtocolVersion string        `json:"protocol_version"`
	Station         []jsonRequest `json:"station,omitempty"`
}

type jsonRequest struct {
	ID       string   `json:"id"`
	Selector []string `json:"selector,omitempty"`
}

type jsonStation struct {
	ID          string       `json:"id"`
	Description string       `json:"description"`
	StartSeq    uint64       `json:"start_seq"`
	EndSeq      uint64       `json:"end_seq"`
	Stream      []jsonStream `json:"stream,omitempty"`
}

type jsonStream struct {
	ID        string `json:"id"`
	Format    string `json:"format"`
	Subformat string `json:"subformat"`
	StartTime string `json:"start_time"`
	EndTime   string `json:"end_time"`
}

type jsonError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// streamsOf lists the streams of a station the ring holds that sels keep.
func streamsOf(in StationInfo, sels []selector) []Stream {
	var out []Stream
	for i, st := range streams {
		if (i < 3 && in.SensorFrames == 0) || (i >= 3 && in.IntensityFrames == 0) || !keeps(sels, st) {
			continue
		}
		out = append(out, st)
	}
	return out
}

func (s *session) infoJSON(level string, wants func(StationKey) bool, sels []selector) error {
	v := jsonInfo{Software: s.srv.software(), Organization: s.srv.organization()}
	switch level {
	case "CAPABILITIES":
		v.Capability = strings.Fields(infoCapabilities)
	case "FORMATS":
		v.Format = map[string]any{
			"2": map[string]any{"mimetype": "application/vnd.fdsn.mseed", "subformat": map[string]string{"D": "Data"}},
			"3": map[string]any{"mimetype": "application/vnd.fdsn.mseed3", "subformat": map[string]string{"D": "Data"}},
		}
		v.Filter = map[string]string{"native": "native format of data, no conversion", "3": "data in miniSEED 3"}
	case "CONNECTIONS":
		v.Connections = s.srv.connections()
	case "STATIONS", "STREAMS":
		v.Station = []jsonStation{}
		for _, in := range s.srv.ring.Stations(wants) {
			js := jsonStation{ID: in.Key.ID(), StartSeq: in.FirstSeq, EndSeq: in.LastSeq}
			if level == "STREAMS" {
				for _, st := range streamsOf(in, sels) {
					js.Stream = append(js.Stream, jsonStream{
						ID: st.sourceID(), Format: "2", Subformat: "D",
						StartTime: time.UnixMilli(in.FirstMs).UTC().Format(time.RFC3339Nano),
						EndTime:   time.UnixMilli(in.NewestMs).UTC().Format(time.RFC3339Nano),
					})
				}
				if len(js.Stream) == 0 {
					continue
				}
			}
			v.Station = append(v.Station, js)
		}
	}
	return s.writeJSON(v, 'I')
}

func (s *session) writeJSON(v jsonInfo, subformat byte) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	h := make([]byte, 17)
	copy(h, "SEJ")
	h[3] = subformat
	binary.LittleEndian.PutUint32(h[4:], uint32(len(body)))
	return s.t.write(h, body)
}

// infoError answers a refused INFO: an error document for protocol 4, an
// ERROR reply for protocol 3.
func (s *session) infoError(code, msg string) error {
	s.srv.m.refused.WithLabelValues(code).Inc()
	if s.proto == 4 {
		return s.writeJSON(jsonInfo{Software: s.srv.software(), Organization: s.srv.organization(), Error: &jsonError{code, msg}}, 'E')
	}
	return s.fail(code, msg)
}

type xmlInfo struct {
	XMLName      xml.Name     `xml:"seedlink"`
	Software     string       `xml:"software,attr"`
	Organization string       `xml:"organization,attr"`
	Started      string       `xml:"started,attr"`
	Capability   []xmlCap     `xml:"capability"`
	Station      []xmlStation `xml:"station"`
}

type xmlCap struct {
	Name string `xml:"name,attr"`
}

type xmlStation struct {
	Name        string      `xml:"name,attr"`
	Network     string      `xml:"network,attr"`
	Description string      `xml:"description,attr"`
	BeginSeq    string      `xml:"begin_seq,attr"`
	EndSeq      string      `xml:"end_seq,attr"`
	StreamCheck string      `xml:"stream_check,attr"`
	Stream      []xmlStream `xml:"stream"`
}

type xmlStream struct {
	Location  string `xml:"location,attr"`
	SeedName  string `xml:"seedname,attr"`
	Type      string `xml:"type,attr"`
	BeginTime string `xml:"begin_time,attr"`
	EndTime   string `xml:"end_time,attr"`
}

// xmlTime is SeedLink 3 INFO's time format.
func xmlTime(ms int64) string {
	t := time.UnixMilli(ms).UTC()
	return fmt.Sprintf("%s.%04d", t.Format("2006/01/02 15:04:05"), t.Nanosecond()/100_000)
}

func (s *session) infoXML(level string, wants func(StationKey) bool, sels []selector) error {
	v := xmlInfo{Software: s.srv.software(), Organization: s.srv.organization(), Started: xmlTime(s.srv.started.UnixMilli())}
	switch level {
	case "CAPABILITIES":
		for _, c := range strings.Fields(infoCapabilities3) {
			v.Capability = append(v.Capability, xmlCap{c})
		}
	case "STATIONS", "STREAMS":
		for _, in := range s.srv.ring.Stations(wants) {
			xs := xmlStation{Name: in.Key.Station, Network: in.Key.Network, StreamCheck: "enabled",
				BeginSeq: fmt.Sprintf("%06X", in.FirstSeq&0xFFFFFF), EndSeq: fmt.Sprintf("%06X", in.LastSeq&0xFFFFFF)}
			if level == "STREAMS" {
				for _, st := range streamsOf(in, sels) {
					xs.Stream = append(xs.Stream, xmlStream{Location: st.Location, SeedName: st.Channel, Type: "D",
						BeginTime: xmlTime(in.FirstMs), EndTime: xmlTime(in.NewestMs)})
				}
			}
			v.Station = append(v.Station, xs)
		}
	}
	body, err := xml.Marshal(v)
	if err != nil {
		return err
	}
	body = append([]byte(xml.Header), body...)
	// Records of RecordLen bytes carry the document; the last one's
	// header says the reply is complete.
	for len(body) > 0 {
		buf := make([]byte, RecordLen)
		n, err := mseed.PackText(buf, mseed.Header{Network: "SL", Station: "INFO", Channel: "LOG", Start: s.srv.now().Truncate(time.Second)}, body)
		if err != nil {
			return err
		}
		body = body[n:]
		head := "SLINFO *"
		if len(body) == 0 {
			head = "SLINFO  "
		}
		if err := s.t.write([]byte(head), buf); err != nil {
			return err
		}
	}
	return nil
}

// connections lists the sessions for INFO CONNECTIONS.
func (s *Server) connections() *jsonConnections {
	s.mu.Lock()
	list := make([]*session, 0, len(s.sessions))
	for sess := range s.sessions {
		list = append(list, sess)
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b *session) int { return a.connected.Compare(b.connected) })
	out := &jsonConnections{ClientCount: len(list), Client: []jsonClient{}}
	for _, sess := range list {
		host, port, _ := net.SplitHostPort(sess.remote)
		v := sess.view.Load()
		if v == nil {
			v = &sessionView{version: "3.1"} // no command yet
		}
		c := jsonClient{Host: host, IPAddress: host, ClientPort: port, Type: sess.kind, ClientID: v.agent,
			ConnectTime: sess.connected.UTC().Format(time.RFC3339), TransmitPackets: sess.txPackets.Load(),
			TransmitBytes: sess.txByte.Load(), ProtocolVersion: v.version}
		for _, r := range v.requests {
			jr := jsonRequest{ID: r.pattern}
			for _, sel := range r.selectors {
				text := sel.glob
				if sel.negate {
					text = "!" + text
				}
				if sel.mseed3 {
					text += ":3"
				}
				jr.Selector = append(jr.Selector, text)
			}
			c.Station = append(c.Station, jr)
		}
		out.Client = append(out.Client, c)
	}
	return out
}

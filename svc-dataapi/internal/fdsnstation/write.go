package fdsnstation

import (
	"bufio"
	"encoding/xml"
	"strconv"
)

// writeXML writes doc as StationXML, element by element: the same bytes as
// encoding/xml's Encoder with a one-space indent gives for the structures
// in stationxml.go (TestWriteXMLIsEncodingXML holds it to that), at several
// times its speed: encoding/xml walks every field by reflection, and a
// level=response answer for 1,000 stations has 6,000 channels.
func writeXML(w *bufio.Writer, doc *document) error {
	x := &xmlWriter{w: w}
	x.open("FDSNStationXML", "xmlns", Namespace, "schemaVersion", doc.SchemaVersion)
	x.text("Source", doc.Source)
	x.optText("Sender", doc.Sender)
	x.optText("Module", doc.Module)
	x.optText("ModuleURI", doc.ModuleURI)
	x.text("Created", doc.Created)
	for i := range doc.Networks {
		n := &doc.Networks[i]
		x.openNode("Network", &n.node)
		x.optText("Description", n.Description)
		x.int("TotalNumberStations", n.TotalNumberStations)
		x.int("SelectedNumberStations", n.SelectedNumberStations)
		for j := range n.Stations {
			x.station(&n.Stations[j])
		}
		x.close("Network")
	}
	x.close("FDSNStationXML")
	// A write error sticks in w: Flush reports it.
	return nil
}

func (x *xmlWriter) station(s *station) {
	x.openNode("Station", &s.node)
	x.float("Latitude", s.Latitude)
	x.float("Longitude", s.Longitude)
	x.float("Elevation", s.Elevation)
	x.open("Site")
	x.text("Name", s.Site.Name)
	x.close("Site")
	x.optText("CreationDate", s.CreationDate)
	x.optText("TerminationDate", s.TerminationDate)
	if s.TotalNumberChannels != nil {
		x.int("TotalNumberChannels", *s.TotalNumberChannels)
	}
	if s.SelectedNumberChannels != nil {
		x.int("SelectedNumberChannels", *s.SelectedNumberChannels)
	}
	for i := range s.Channels {
		x.channel(&s.Channels[i])
	}
	x.close("Station")
}

func (x *xmlWriter) channel(c *channel) {
	x.openNode("Channel", &c.node, "locationCode", c.LocationCode)
	x.optText("Description", c.Description)
	x.float("Latitude", c.Latitude)
	x.float("Longitude", c.Longitude)
	x.float("Elevation", c.Elevation)
	x.float("Depth", c.Depth)
	x.float("Azimuth", c.Azimuth)
	x.float("Dip", c.Dip)
	for _, t := range c.Type {
		x.text("Type", t)
	}
	x.float("SampleRate", c.SampleRate)
	if e := c.Sensor; e != nil {
		x.open("Sensor")
		x.optText("Type", e.Type)
		x.optText("Description", e.Description)
		x.close("Sensor")
	}
	if r := c.Response; r != nil {
		x.open("Response")
		s := &r.InstrumentSensitivity
		x.open("InstrumentSensitivity")
		x.float("Value", s.Value)
		x.float("Frequency", s.Frequency)
		x.units("InputUnits", s.InputUnits)
		x.units("OutputUnits", s.OutputUnits)
		x.close("InstrumentSensitivity")
		for i := range r.Stages {
			x.stage(&r.Stages[i])
		}
		x.close("Response")
	}
	x.close("Channel")
}

func (x *xmlWriter) stage(s *stage) {
	x.open("Stage", "number", strconv.Itoa(s.Number))
	pz := &s.PolesZeros
	x.open("PolesZeros")
	x.units("InputUnits", pz.InputUnits)
	x.units("OutputUnits", pz.OutputUnits)
	x.text("PzTransferFunctionType", pz.PzTransferFunctionType)
	x.float("NormalizationFactor", pz.NormalizationFactor)
	x.float("NormalizationFrequency", pz.NormalizationFrequency)
	x.close("PolesZeros")
	if d := s.Decimation; d != nil {
		x.open("Decimation")
		x.float("InputSampleRate", d.InputSampleRate)
		x.int("Factor", d.Factor)
		x.int("Offset", d.Offset)
		x.float("Delay", d.Delay)
		x.float("Correction", d.Correction)
		x.close("Decimation")
	}
	x.open("StageGain")
	x.float("Value", s.StageGain.Value)
	x.float("Frequency", s.StageGain.Frequency)
	x.close("StageGain")
	x.close("Stage")
}

func (x *xmlWriter) units(name string, u units) {
	x.open(name)
	x.text("Name", u.Name)
	x.optText("Description", u.Description)
	x.close(name)
}

// xmlWriter writes indented elements as encoding/xml's Encoder does with
// Indent("", " "): each start tag on a line of its own, one space deeper
// than its parent's; an element with text only on one line; the end tag
// of one with children on a line of its own; the first start tag on the
// line it is given.
type xmlWriter struct {
	w       *bufio.Writer
	depth   int
	started bool
	// children[depth] records whether the open element at that depth has
	// had a child element, so its end tag goes on a line of its own.
	children []bool
	num      []byte
}

func (x *xmlWriter) indent() {
	if x.started {
		_ = x.w.WriteByte('\n')
		for range x.depth {
			_ = x.w.WriteByte(' ')
		}
	}
	x.started = true
}

// startTag writes <name a="v"...> for the attributes given as name-value
// pairs, empty values included.
func (x *xmlWriter) startTag(name string, attrs ...string) {
	if x.depth > 0 {
		x.children[x.depth-1] = true
	}
	x.indent()
	_ = x.w.WriteByte('<')
	_, _ = x.w.WriteString(name)
	for i := 0; i+1 < len(attrs); i += 2 {
		x.attr(attrs[i], attrs[i+1])
	}
	_ = x.w.WriteByte('>')
}

func (x *xmlWriter) attr(name, value string) {
	_ = x.w.WriteByte(' ')
	_, _ = x.w.WriteString(name)
	_, _ = x.w.WriteString(`="`)
	_ = xml.EscapeText(x.w, []byte(value))
	_ = x.w.WriteByte('"')
}

// open starts an element that will hold others.
func (x *xmlWriter) open(name string, attrs ...string) {
	x.startTag(name, attrs...)
	x.push()
}

// openNode opens an element with a BaseNodeType's attributes — code always
// (the schema requires it), the others when set — and then extra,
// name-value pairs written even when empty.
func (x *xmlWriter) openNode(name string, n *node, extra ...string) {
	x.startTagNode(name, n, extra)
	x.push()
}

// push enters the element just started.
func (x *xmlWriter) push() {
	x.depth++
	if len(x.children) < x.depth {
		x.children = append(x.children, false)
	}
	x.children[x.depth-1] = false
}

func (x *xmlWriter) startTagNode(name string, n *node, extra []string) {
	if x.depth > 0 {
		x.children[x.depth-1] = true
	}
	x.indent()
	_ = x.w.WriteByte('<')
	_, _ = x.w.WriteString(name)
	x.attr("code", n.Code)
	for _, a := range [...][2]string{{"startDate", n.StartDate}, {"endDate", n.EndDate}, {"restrictedStatus", n.RestrictedStatus}, {"alternateCode", n.AlternateCode}} {
		if a[1] != "" {
			x.attr(a[0], a[1])
		}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		x.attr(extra[i], extra[i+1])
	}
	_ = x.w.WriteByte('>')
}

func (x *xmlWriter) close(name string) {
	x.depth--
	if x.children[x.depth] {
		x.indent()
	}
	_, _ = x.w.WriteString("</")
	_, _ = x.w.WriteString(name)
	_ = x.w.WriteByte('>')
}

// text writes <name>value</name>.
func (x *xmlWriter) text(name, value string) {
	x.startTag(name)
	_ = xml.EscapeText(x.w, []byte(value))
	x.end(name)
}

// optText is text unless value is empty (omitempty).
func (x *xmlWriter) optText(name, value string) {
	if value != "" {
		x.text(name, value)
	}
}

func (x *xmlWriter) int(name string, v int) {
	x.startTag(name)
	x.num = strconv.AppendInt(x.num[:0], int64(v), 10)
	_, _ = x.w.Write(x.num)
	x.end(name)
}

func (x *xmlWriter) float(name string, v float64) {
	x.startTag(name)
	x.num = strconv.AppendFloat(x.num[:0], v, 'g', -1, 64)
	_, _ = x.w.Write(x.num)
	x.end(name)
}

func (x *xmlWriter) end(name string) {
	_, _ = x.w.WriteString("</")
	_, _ = x.w.WriteString(name)
	_ = x.w.WriteByte('>')
}

package fdsnstation

import "encoding/xml"

// The part of FDSN StationXML 1.2 (www.fdsn.org/xml/station, the schema in
// testdata/fdsn-station.xsd) this service writes, with the schema's element
// order: encoding/xml writes fields in declaration order, and the schema's
// sequences are ordered.

// Namespace is StationXML 1's, the default namespace of every document:
// readers such as seisplotjs look elements up in it.
const Namespace = "http://www.fdsn.org/xml/station/1"

// SchemaVersion is the StationXML version the documents follow.
const SchemaVersion = "1.2"

type document struct {
	XMLName       xml.Name  `xml:"http://www.fdsn.org/xml/station/1 FDSNStationXML"`
	SchemaVersion string    `xml:"schemaVersion,attr"`
	Source        string    `xml:"Source"`
	Sender        string    `xml:"Sender,omitempty"`
	Module        string    `xml:"Module,omitempty"`
	ModuleURI     string    `xml:"ModuleURI,omitempty"`
	Created       string    `xml:"Created"`
	Networks      []network `xml:"Network"`
}

// node is the schema's BaseNodeType: the attributes every level shares.
type node struct {
	Code             string `xml:"code,attr"`
	StartDate        string `xml:"startDate,attr,omitempty"`
	EndDate          string `xml:"endDate,attr,omitempty"`
	RestrictedStatus string `xml:"restrictedStatus,attr,omitempty"`
	AlternateCode    string `xml:"alternateCode,attr,omitempty"`
}

type network struct {
	node
	Description            string    `xml:"Description,omitempty"`
	TotalNumberStations    int       `xml:"TotalNumberStations"`
	SelectedNumberStations int       `xml:"SelectedNumberStations"`
	Stations               []station `xml:"Station"`
}

type station struct {
	node
	Latitude               float64   `xml:"Latitude"`
	Longitude              float64   `xml:"Longitude"`
	Elevation              float64   `xml:"Elevation"`
	Site                   site      `xml:"Site"`
	CreationDate           string    `xml:"CreationDate,omitempty"`
	TerminationDate        string    `xml:"TerminationDate,omitempty"`
	TotalNumberChannels    *int      `xml:"TotalNumberChannels"`
	SelectedNumberChannels *int      `xml:"SelectedNumberChannels"`
	Channels               []channel `xml:"Channel"`
}

type site struct {
	Name string `xml:"Name"`
}

type channel struct {
	node
	LocationCode string     `xml:"locationCode,attr"`
	Description  string     `xml:"Description,omitempty"`
	Latitude     float64    `xml:"Latitude"`
	Longitude    float64    `xml:"Longitude"`
	Elevation    float64    `xml:"Elevation"`
	Depth        float64    `xml:"Depth"`
	Azimuth      float64    `xml:"Azimuth"`
	Dip          float64    `xml:"Dip"`
	Type         []string   `xml:"Type"`
	SampleRate   float64    `xml:"SampleRate"`
	Sensor       *equipment `xml:"Sensor"`
	Response     *response  `xml:"Response"`
	// sens is the sensitivity whatever the level: the text format
	// gives it at level=channel.
	sens sensitivity
}

type equipment struct {
	Type        string `xml:"Type,omitempty"`
	Description string `xml:"Description,omitempty"`
}

type response struct {
	InstrumentSensitivity sensitivity `xml:"InstrumentSensitivity"`
	Stages                []stage     `xml:"Stage"`
}

// stage is the schema's ResponseStageType, as far as a flat response
// needs it: a filter of poles and zeros (here none), the stage's
// decimation when it outputs counts, and its gain.
type stage struct {
	Number     int         `xml:"number,attr"`
	PolesZeros polesZeros  `xml:"PolesZeros"`
	Decimation *decimation `xml:"Decimation"`
	StageGain  stageGain   `xml:"StageGain"`
}

type polesZeros struct {
	InputUnits             units   `xml:"InputUnits"`
	OutputUnits            units   `xml:"OutputUnits"`
	PzTransferFunctionType string  `xml:"PzTransferFunctionType"`
	NormalizationFactor    float64 `xml:"NormalizationFactor"`
	NormalizationFrequency float64 `xml:"NormalizationFrequency"`
}

type decimation struct {
	InputSampleRate float64 `xml:"InputSampleRate"`
	Factor          int     `xml:"Factor"`
	Offset          int     `xml:"Offset"`
	Delay           float64 `xml:"Delay"`
	Correction      float64 `xml:"Correction"`
}

type stageGain struct {
	Value     float64 `xml:"Value"`
	Frequency float64 `xml:"Frequency"`
}

type sensitivity struct {
	Value       float64 `xml:"Value"`
	Frequency   float64 `xml:"Frequency"`
	InputUnits  units   `xml:"InputUnits"`
	OutputUnits units   `xml:"OutputUnits"`
}

type units struct {
	Name        string `xml:"Name"`
	Description string `xml:"Description,omitempty"`
}

package detect

import "math"

//go:generate sh -c "go run ./gentable > table.go"

// Grid of intensityTable (see gentable).
const (
	tableMinMag   = 2.0
	tableMagStep  = 0.1
	tableMags     = 66
	tableLogMinKm = 0.0
	tableLogStep  = 0.1
	tableDists    = 31
)

// MinMagnitude and MaxMagnitude bound the estimates: the table's range.
const (
	MinMagnitude = tableMinMag
	MaxMagnitude = tableMinMag + (tableMags-1)*tableMagStep
)

// distIndex locates a hypocentral distance in the table: column j and the
// weight of column j+1.
func distIndex(km float64) (int, float64) {
	x := (math.Log10(max(km, 1)) - tableLogMinKm) / tableLogStep
	if x >= tableDists-1 {
		return tableDists - 2, 1
	}
	j := int(x)
	return j, x - float64(j)
}

// predicted is the model's intensity at magnitude row i (exact) for a
// distance located by distIndex.
func predicted(i, j int, w float64) float64 {
	row := &intensityTable[i]
	return float64(row[j])*(1-w) + float64(row[j+1])*w
}

// PredictIntensity interpolates the model's intensity at magnitude mag and
// hypocentral distance km.
func PredictIntensity(mag, km float64) float64 {
	j, w := distIndex(km)
	x := (min(max(mag, MinMagnitude), MaxMagnitude) - tableMinMag) / tableMagStep
	i := min(int(x), tableMags-2)
	u := x - float64(i)
	return predicted(i, j, w)*(1-u) + predicted(i+1, j, w)*u
}

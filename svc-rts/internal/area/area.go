// Package area maps stations to the areas existing clients draw: the cells
// ("boxes") of the fixed grid over Taiwan from SPEC §4, and intensity levels.
package area

// Longitude edges west→east (index 0–9) and latitude edges north→south
// (index 0–10) of the grid, exactly as SPEC §4 gives them.
var (
	lonEdges = [...]float64{117.97, 118.46, 118.95, 119.43, 119.92, 120.40, 120.89, 121.38, 121.86, 122.35}
	latEdges = [...]float64{25.46, 25.10, 24.74, 24.38, 24.02, 23.66, 23.30, 22.94, 22.58, 22.22, 21.86}
)

// cells lists the grid cell (row, col) of each box ID, index = ID.
var cells = [...][2]int{
	{0, 6}, {0, 7}, {0, 8}, {1, 6}, {1, 7}, {1, 8}, {2, 5}, {2, 6}, {2, 7}, {2, 8},
	{3, 4}, {3, 5}, {3, 6}, {3, 7}, {4, 3}, {4, 4}, {4, 5}, {4, 6}, {4, 7}, {5, 2},
	{5, 3}, {5, 4}, {5, 5}, {5, 6}, {5, 7}, {6, 2}, {6, 3}, {6, 4}, {6, 5}, {6, 6},
	{6, 7}, {7, 4}, {7, 5}, {7, 6}, {7, 7}, {8, 4}, {8, 5}, {8, 6}, {9, 5}, {9, 6},
	{9, 7}, {2, 0}, {2, 1},
}

// byCell is the inverse of cells.
var byCell = func() map[[2]int]uint32 {
	m := make(map[[2]int]uint32, len(cells))
	for id, c := range cells {
		m[c] = uint32(id)
	}
	return m
}()

// NumBoxes is the number of box IDs (0 to NumBoxes-1).
const NumBoxes = len(cells)

// Box returns the box ID containing (lat, lon), or false when the point lies
// outside every box. A point on an inner edge belongs to the cell to its
// south and east.
func Box(lat, lon float64) (uint32, bool) {
	row, col := -1, -1
	for i := 0; i+1 < len(latEdges); i++ {
		if lat <= latEdges[i] && lat > latEdges[i+1] {
			row = i
			break
		}
	}
	for i := 0; i+1 < len(lonEdges); i++ {
		if lon >= lonEdges[i] && lon < lonEdges[i+1] {
			col = i
			break
		}
	}
	if row < 0 || col < 0 {
		return 0, false
	}
	id, ok := byCell[[2]int{row, col}]
	return id, ok
}

// Bounds returns the box's latitude span (south, north) and longitude span
// (west, east).
func Bounds(id uint32) (south, north, west, east float64, ok bool) {
	if int(id) >= len(cells) {
		return 0, 0, 0, 0, false
	}
	c := cells[id]
	return latEdges[c[0]+1], latEdges[c[0]], lonEdges[c[1]], lonEdges[c[1]+1], true
}

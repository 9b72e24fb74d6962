// The area grid of SPEC §4, as existing clients draw it: cells of a fixed
// grid over Taiwan, keyed by the `box` IDs of RTS snapshots.

// Longitude edges west→east (index 0–9), latitude edges north→south (0–10).
export const LON_EDGES = [117.97, 118.46, 118.95, 119.43, 119.92, 120.40, 120.89, 121.38, 121.86, 122.35];
export const LAT_EDGES = [25.46, 25.10, 24.74, 24.38, 24.02, 23.66, 23.30, 22.94, 22.58, 22.22, 21.86];

// Cell `row/col` spans latitude edges row..row+1 and longitude edges col..col+1.
const CELLS =
  "0:0/6 1:0/7 2:0/8 3:1/6 4:1/7 5:1/8 6:2/5 7:2/6 8:2/7 9:2/8 10:3/4 11:3/5 12:3/6 13:3/7 " +
  "14:4/3 15:4/4 16:4/5 17:4/6 18:4/7 19:5/2 20:5/3 21:5/4 22:5/5 23:5/6 24:5/7 25:6/2 26:6/3 " +
  "27:6/4 28:6/5 29:6/6 30:6/7 31:7/4 32:7/5 33:7/6 34:7/7 35:8/4 36:8/5 37:8/6 38:9/5 39:9/6 " +
  "40:9/7 41:2/0 42:2/1";

// AREAS maps an area ID ("0"–"42") to its bounds in degrees.
export const AREAS = new Map(
  CELLS.split(" ").map((cell) => {
    const [id, rc] = cell.split(":");
    const [row, col] = rc.split("/").map(Number);
    return [id, {
      id, row, col,
      west: LON_EDGES[col], east: LON_EDGES[col + 1],
      north: LAT_EDGES[row], south: LAT_EDGES[row + 1],
    }];
  }),
);

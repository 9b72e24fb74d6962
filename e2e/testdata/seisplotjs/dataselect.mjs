// Reads waveforms from a live fdsnws-dataselect with seisplotjs's
// DataSelectQuery and miniSEED parser, by GET (querySeismograms) and by POST
// (postQuerySeismograms), and prints what it decoded as JSON for
// e2e/fdsn_test.go to compare with the REST Query of the same window.
//
// Usage: node dataselect.mjs BASE_URL NET STA LOC START END
//
// The set-up is station.mjs's: jsdom's globals before seisplotjs is
// imported, node's fetch without seisplotjs's referrer.
import { JSDOM } from "jsdom";

const { window } = new JSDOM("");
for (const name of ["window", "document", "customElements", "HTMLElement", "HTMLDivElement", "DOMParser", "Node", "Element"]) {
  globalThis[name] = name === "window" ? window : window[name];
}
console.log = console.error;
const { fdsndataselect, seismogram, util } = await import("seisplotjs");
util.setDefaultFetch((url, init) => fetch(url, { ...init, referrer: undefined }));

const [base, net, sta, loc, startISO, endISO] = process.argv.slice(2);
const url = new URL(base);
const start = util.isoToDateTime(startISO);
const end = util.isoToDateTime(endISO);
const query = () =>
  new fdsndataselect.DataSelectQuery()
    .protocol(url.protocol.replace(":", ""))
    .host(url.hostname)
    .port(Number(url.port));

// Each seismogram's segments: start (Unix ms), rate, samples.
const print = (seismograms) =>
  seismograms.map((s) => ({
    channel: s.channelCode,
    sourceId: s.sourceId.toString(),
    segments: s.segments.map((g) => ({ start: g.startTime.toMillis(), rate: g.sampleRate, y: Array.from(g.y) })),
  }));

const version = await query().queryVersion();
const got = await query()
  .networkCode(net)
  .stationCode(sta)
  .locationCode(loc === "" ? "--" : loc)
  .channelCode("BN?")
  .startTime(start)
  .endTime(end)
  .querySeismograms();
const posted = await query().postQuerySeismograms([
  seismogram.SeismogramDisplayData.fromCodesAndTimes(net, sta, loc, "MXI", start, end),
]);
const out = { version, get: print(got), post: print(posted.map((sdd) => sdd.seismogram).filter((s) => s)) };
window.close();
process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));

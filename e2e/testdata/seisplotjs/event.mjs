// Reads earthquake reports from a live fdsnws-event with seisplotjs's
// EventQuery (with includearrivals=true, so a triggered report's station
// amplitudes too) and QuakeML parser, and prints what it parsed as JSON
// for e2e/fdsn_test.go to compare with the data API's reports.
//
// Usage: node event.mjs BASE_URL START END
//
// The set-up is station.mjs's: jsdom's globals (DOMParser for the QuakeML)
// before seisplotjs is imported, node's fetch without seisplotjs's referrer.
import { JSDOM } from "jsdom";

const { window } = new JSDOM("");
for (const name of ["window", "document", "customElements", "HTMLElement", "HTMLDivElement", "DOMParser", "Node", "Element"]) {
  globalThis[name] = name === "window" ? window : window[name];
}
console.log = console.error;
const { fdsnevent, util } = await import("seisplotjs");
util.setDefaultFetch((url, init) => fetch(url, { ...init, referrer: undefined }));

const [base, startISO, endISO] = process.argv.slice(2);
const url = new URL(base);
const query = new fdsnevent.EventQuery()
  .protocol(url.protocol.replace(":", ""))
  .host(url.hostname)
  .port(Number(url.port))
  .startTime(util.isoToDateTime(startISO))
  .endTime(util.isoToDateTime(endISO))
  .includeArrivals(true);

const version = await query.queryVersion();
const quakes = await query.query();
const out = {
  version,
  quakes: quakes.map((q) => ({
    eventId: q.eventId,
    time: q.time.toMillis(),
    latitude: q.latitude,
    longitude: q.longitude,
    depthKm: q.depthKm,
    magnitude: q.magnitude.mag,
    magnitudeType: q.magnitude.type,
    description: q.description,
    amplitudes: q.amplitudeList.map((a) => ({
      type: a.type,
      unit: a.unit,
      value: a.genericAmplitude.value,
      codes: a.waveformID ? `${a.waveformID.networkCode}.${a.waveformID.stationCode}.${a.waveformID.locationCode}` : "",
    })),
  })),
};
window.close();
process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));

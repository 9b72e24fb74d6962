// Reads what a live fdsnws-availability says the archive holds with
// seisplotjs's AvailabilityQuery — query (stretches) and extent (first and
// last sample), as JSON — and prints the channel-time windows it
// parsed as JSON for e2e/fdsn_test.go to compare with the service's own
// text answer of the same request.
//
// Usage: node availability.mjs BASE_URL NET STA LOC START END
//
// The set-up is station.mjs's: jsdom's globals before seisplotjs is
// imported.
import { JSDOM } from "jsdom";

const { window } = new JSDOM("");
for (const name of ["window", "document", "customElements", "HTMLElement", "HTMLDivElement", "DOMParser", "Node", "Element"]) {
  globalThis[name] = name === "window" ? window : window[name];
}
console.log = console.error;
const { fdsnavailability, util } = await import("seisplotjs");
// node's fetch without seisplotjs's referrer; an answer that is not ok is
// logged for the test (seisplotjs says only that it was not ok).
util.setDefaultFetch(async (url, init) => {
  const resp = await fetch(url, { ...init, referrer: undefined });
  if (!resp.ok) {
    console.error(`${url}: ${resp.status} ${await resp.clone().text()}`);
  }
  return resp;
});

const [base, net, sta, loc, startISO, endISO] = process.argv.slice(2);
const url = new URL(base);
const start = util.isoToDateTime(startISO);
const end = util.isoToDateTime(endISO);
const query = () =>
  new fdsnavailability.AvailabilityQuery()
    .protocol(url.protocol.replace(":", ""))
    .host(url.hostname)
    .port(Number(url.port))
    .networkCode(net)
    .stationCode(sta)
    .startTime(start)
    .endTime(end);

// Each window: its channel's codes and its times (Unix ms).
const print = (sdds) =>
  sdds.map((d) => ({
    codes: `${d.networkCode}.${d.stationCode}.${d.locationCode}.${d.channelCode}`,
    start: d.startTime.toMillis(),
    end: d.endTime.toMillis(),
  }));

const version = await query().queryVersion();
const spans = await query().channelCode("BN?").query();
const extents = await query().channelCode("MX?").extent();
// Not AvailabilityQuery.postQuery: seisplotjs 3.2.2 writes the format
// line of its POST body with format(), the setter, which returns the query
// (src/fdsnavailability.ts, createPostBody: makePostParm("format",
// this.format())), so its POST is refused by any server. The POST route is
// tested with the body it means to send in svc-dataapi's
// TestFDSNAvailability.
const out = { version, query: print(spans), extent: print(extents) };
window.close();
process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));

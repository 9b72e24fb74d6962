// Reads station metadata from a live fdsnws-station with seisplotjs's
// StationQuery and StationXML parser, and prints what it parsed as JSON
// for e2e/fdsn_test.go to compare with the registry.
//
// Usage: node station.mjs BASE_URL NET STA
//
// seisplotjs is written for browsers: its node build still defines custom
// elements at import (class … extends HTMLDivElement) and parses XML with
// DOMParser, so a jsdom window's globals come first; its fetch lookup
// reads `window`, so node's own fetch is given as the default
// (seisplotjs src/util.ts setDefaultFetch), without the request's referrer
// "seisplotjs" (util.ts defaultFetchInitObj), which node's fetch refuses as
// not a URL.
import { JSDOM } from "jsdom";

const { window } = new JSDOM("");
for (const name of ["window", "document", "customElements", "HTMLElement", "HTMLDivElement", "DOMParser", "Node", "Element"]) {
  globalThis[name] = name === "window" ? window : window[name];
}
// seisplotjs logs each fetch to the console; stdout is for the result.
console.log = console.error;
const { fdsnstation, util } = await import("seisplotjs");
util.setDefaultFetch((url, init) => fetch(url, { ...init, referrer: undefined }));

const [base, net, sta] = process.argv.slice(2);
const url = new URL(base);
const query = new fdsnstation.StationQuery()
  .protocol(url.protocol.replace(":", ""))
  .host(url.hostname)
  .port(Number(url.port))
  .networkCode(net)
  .stationCode(sta);

const iso = (d) => (d ? d.toISO() : null);
const version = await query.queryVersion();
const networks = await query.queryResponses();
const out = {
  version,
  networks: networks.map((n) => ({
    code: n.networkCode,
    description: n.description,
    start: iso(n.startDate),
    stations: n.stations.map((s) => ({
      code: s.stationCode,
      name: s.name,
      start: iso(s.startDate),
      end: iso(s.endDate),
      latitude: s.latitude,
      longitude: s.longitude,
      elevation: s.elevation,
      channels: s.channels.map((c) => ({
        location: c.locationCode,
        code: c.channelCode,
        sourceId: c.sourceId.toString(),
        start: iso(c.startDate),
        sampleRate: c.sampleRate,
        azimuth: c.azimuth,
        dip: c.dip,
        sensitivity: c.response?.instrumentSensitivity?.sensitivity ?? null,
        inputUnits: c.response?.instrumentSensitivity?.inputUnits ?? null,
        outputUnits: c.response?.instrumentSensitivity?.outputUnits ?? null,
        stages: (c.response?.stages ?? []).map((st) => ({
          type: st.filter?.constructor?.name ?? null,
          inputUnits: st.filter?.inputUnits ?? null,
          outputUnits: st.filter?.outputUnits ?? null,
          poles: st.filter?.poles?.length ?? null,
          zeros: st.filter?.zeros?.length ?? null,
          decimationRate: st.decimation?.inputSampleRate ?? null,
          gain: st.gain?.value ?? null,
        })),
      })),
    })),
  })),
};
// jsdom's window would keep node running: exit once stdout, a pipe
// written asynchronously, has taken it all.
window.close();
process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));

// The dashboard: wires the live stream, the data API and the views.
//
// Everything comes from the edge that served the page or, after the stream
// switched entrance, from the next one: the RTS, EEW and report events over
// one stream (/v1/stream?topics=rts,eew,report), a chosen station's
// waveform over another (/v1/stream/waveform), stations, links and the
// latest reports from the routed data API, and each edge's own state from
// its /v1/edge/status. Events only
// update state; the views are redrawn at most once per animation frame.
//
// window.shindo exposes what the page shows, for tests and debugging.

import { DataAPI, fetchJSON } from "./api.js";
import { basemap } from "./basemap.js";
import { CLASSES, COLOURS, TEXT, OFFLINE, level } from "./intensity.js";
import { StationMap } from "./map.js";
import { Stream } from "./sse.js";
import { WaveformView } from "./waveform.js";

const $ = (id) => document.getElementById(id);

// h builds an element; children are nodes or text (never parsed as HTML).
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "style") Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

function chip(lvl) {
  return h("span", { class: "chip", style: { background: COLOURS[lvl], color: TEXT[lvl] } }, CLASSES[lvl]);
}

// taiwanTime formats Unix ms as HH:MM:SS.s in Taiwan (UTC+8, no DST).
function taiwanTime(ms, tenths = true) {
  const s = new Date(ms + 8 * 3600e3).toISOString();
  return tenths ? s.slice(11, 21) : s.slice(11, 19);
}

// num formats a number from the wire, or a dash for anything else.
function num(v, digits) {
  const n = Number(v);
  return v !== null && v !== undefined && Number.isFinite(n) ? n.toFixed(digits) : "—";
}

function taiwanDateTime(ms) {
  return new Date(ms + 8 * 3600e3).toISOString().slice(0, 19).replace("T", " ");
}

const state = {
  site: "",
  entrances: [],
  stations: new Map(), // id → {id, name, net, lat, lon, code}, active ones
  stationsLoaded: false,
  snapshot: null, // the latest RTS snapshot
  live: new Map(), // id → {level, alert}
  lastTick: 0,
  ticks: 0,
  missedTicks: 0, // ticks skipped between two shown (a resume should leave none)
  entrance: "", // site named by the stream's info event
  streamState: { connected: false, failures: 0, switches: 0 },
  alerts: new Map(), // detection ID → {alert, active, seen}
  reports: new Map(), // report ID → report (/v1/reports JSON), the newest few
  reportsLoaded: false, // the list was read once; the stream's report topic carries on from it
  edges: new Map(), // entrance URL → {status, error, at}
  links: [],
  linksAt: 0,
  apiError: "",
  selected: null,
  waveState: "",
  log: [],
};

function log(msg) {
  state.log.push({ at: Date.now(), msg });
  if (state.log.length > 100) state.log.shift();
  render.log = true;
  schedule();
}

// Rendering: events mark what changed; one animation frame redraws it.
const render = { header: true, detections: true, reports: true, station: true, areas: true, sites: true, log: true };
let frame = 0;
function schedule() {
  if (!frame) frame = requestAnimationFrame(draw);
}

function draw() {
  frame = 0;
  if (render.header) renderHeader();
  if (render.detections) renderDetections();
  if (render.reports) renderReports();
  if (render.station) renderStation();
  if (render.areas) renderAreas();
  if (render.sites) renderSites();
  if (render.log) renderLog();
  for (const k of Object.keys(render)) render[k] = false;
}

async function loadConfig() {
  try {
    return await fetchJSON("config.json", 5000);
  } catch (err) {
    return { site: "", entrances: [] };
  }
}

// orderEntrances puts the page's own edge first and keeps the ring order.
function orderEntrances(list) {
  const bases = (list || []).map((s) => String(s).replace(/\/+$/, "")).filter(Boolean);
  const i = bases.indexOf(location.origin);
  if (i > 0) return [...bases.slice(i), ...bases.slice(0, i)];
  if (i < 0) return [location.origin, ...bases];
  return bases;
}

const cfg = await loadConfig();
state.site = cfg.site || "";
state.entrances = orderEntrances(cfg.entrances);

const api = new DataAPI(state.entrances, {
  onSwitch: (base, err) => log(`data API: ${err.message} — now ${base}`),
});

const map = new StationMap($("map"), basemap, (id) => select(id));
const wave = new WaveformView($("waveform"));

// Stations from the data API, refreshed every minute and when the stream
// names a station we do not know.
let stationsLoading = null;
let stationsAt = 0;
function loadStations() {
  if (stationsLoading) return stationsLoading;
  stationsAt = Date.now();
  stationsLoading = api
    .get("/v1/stations")
    .then((body) => {
      const m = new Map();
      for (const s of body.stations || []) {
        if (s.active === false) continue;
        m.set(s.id, s);
      }
      state.stations = m;
      state.stationsLoaded = true;
      state.apiError = "";
      map.setStations([...m.values()].map((s) => ({ id: s.id, lon: s.lon, lat: s.lat })));
      render.header = render.station = render.areas = true;
      schedule();
    })
    .catch((err) => {
      state.apiError = `stations: ${err.message}`;
      render.sites = true;
      schedule();
    })
    .finally(() => {
      stationsLoading = null;
    });
  return stationsLoading;
}

function onRTS(snap) {
  if (typeof snap.time !== "number" || snap.time <= state.lastTick) return; // repeated or older
  if (state.lastTick && snap.time - state.lastTick > 500) state.missedTicks += Math.round((snap.time - state.lastTick) / 500) - 1;
  state.snapshot = snap;
  state.lastTick = snap.time;
  state.ticks++;
  const live = new Map();
  let unknown = false;
  for (const [id, v] of Object.entries(snap.station || {})) {
    live.set(id, { level: level(v.i), alert: v.alert === 1 });
    if (!unknown && state.stationsLoaded && !state.stations.has(id)) unknown = true;
  }
  state.live = live;
  const boxes = new Map(Object.entries(snap.box || {}).map(([id, lvl]) => [id, Number(lvl)]));
  map.update(live, boxes);
  if (unknown && Date.now() - stationsAt > 10000) loadStations();
  render.header = render.areas = true;
  if (state.selected) render.station = true;
  schedule();
}

function onEEW(alerts) {
  if (!Array.isArray(alerts)) return;
  const now = Date.now();
  const active = new Set();
  for (const a of alerts) {
    if (!a || typeof a.id !== "string") continue;
    active.add(a.id);
    const prev = state.alerts.get(a.id);
    if (!prev || (a.serial ?? 0) >= (prev.alert.serial ?? 0)) state.alerts.set(a.id, { alert: a, active: true, seen: now });
  }
  for (const [id, rec] of state.alerts) {
    if (!active.has(id)) rec.active = false;
  }
  // Keep the ten newest.
  const ids = [...state.alerts.keys()].sort((x, y) => (state.alerts.get(y).alert.eq?.time ?? 0) - (state.alerts.get(x).alert.eq?.time ?? 0));
  for (const id of ids.slice(10)) state.alerts.delete(id);
  render.detections = true;
  schedule();
}

// Reports: the newest from the data API at start, then each new or revised
// one as the report topic announces it.
const REPORTS_SHOWN = 5;
function onReports(list) {
  if (!Array.isArray(list)) return;
  for (const r of list) {
    if (r && typeof r.id === "string") state.reports.set(r.id, r);
  }
  const ids = [...state.reports.keys()].sort((x, y) => Number(state.reports.get(y).time_ms) - Number(state.reports.get(x).time_ms));
  for (const id of ids.slice(REPORTS_SHOWN)) state.reports.delete(id);
  render.reports = true;
  schedule();
}

let reportsLoading = null;
function loadReports() {
  if (reportsLoading) return reportsLoading;
  reportsLoading = api
    .get(`/v1/reports?page_size=${REPORTS_SHOWN}`)
    .then((body) => {
      state.reportsLoaded = true;
      onReports(body.reports);
    })
    .catch((err) => log(`reports: ${err.message}`))
    .finally(() => {
      reportsLoading = null;
    });
  return reportsLoading;
}

const stream = new Stream({
  entrances: state.entrances,
  path: "/v1/stream?topics=rts,eew,report",
  onEvent(ev) {
    if (ev.event === "info") {
      try {
        state.entrance = JSON.parse(ev.data).location || "";
      } catch {
        state.entrance = "";
      }
      render.header = true;
      schedule();
      return;
    }
    if (ev.event === "gap") {
      log(`gap in the stream at ${ev.base}: some events were older than the edge's history`);
      loadReports(); // what the report topic may have announced meanwhile
      return;
    }
    if (ev.event !== "message") return;
    let data;
    try {
      data = JSON.parse(ev.data);
    } catch {
      return;
    }
    // The topic is the event ID's suffix: -0 rts, -1 eew, -2 report.
    const topic = ev.id.slice(ev.id.lastIndexOf("-") + 1);
    if (topic === "0") onRTS(data);
    else if (topic === "1") onEEW(data);
    else if (topic === "2") onReports(data);
  },
  onState(s) {
    state.streamState = s;
    if (s.connected) {
      log(`stream connected to ${s.base}${s.switched ? " (switched entrance)" : ""}`);
      if (!state.reportsLoaded) loadReports(); // the first read failed: try again
      if (waveStream && waveStream.base !== waveBase) waveStream.restart();
    } else if (s.switching) {
      log(`3 failed reconnects: switching entrance to ${s.base}`);
    } else if (s.dropped) {
      log(`stream dropped at ${s.base} (${s.error}); reconnecting in ${stream.retry / 1000} s`);
    } else {
      log(`reconnect to ${s.base} failed (${s.failures}/${stream.failuresToSwitch}): ${s.error}`);
    }
    render.header = render.sites = true;
    schedule();
  },
});

// The waveform stream of the chosen station goes where the main stream
// goes.
let waveStream = null;
let waveBase = "";
function select(id) {
  if (!id || id === state.selected) return;
  state.selected = id;
  map.select(id);
  wave.reset(id);
  if (waveStream) waveStream.stop();
  state.waveState = "connecting…";
  waveStream = new Stream({
    entrances: state.entrances,
    follow: () => stream.base,
    giveUpOn: [404],
    path: "/v1/stream/waveform?station=" + encodeURIComponent(id),
    onEvent(ev) {
      if (ev.event !== "waveform") return;
      try {
        wave.push(JSON.parse(ev.data));
      } catch {
        // a malformed chunk is skipped
      }
    },
    onState(s) {
      waveBase = s.base;
      state.waveState = s.connected
        ? `live from ${s.base}`
        : s.gaveUp
          ? `no waveform: ${s.error}`
          : `waveform stream: ${s.error || "dropped"}; retrying in ${waveStream.retry / 1000} s`;
      render.station = true;
      schedule();
    },
  });
  waveStream.start();
  render.station = true;
  schedule();
}

// Each edge's own state, asked of each edge directly.
async function pollEdges() {
  await Promise.all(
    state.entrances.map(async (base) => {
      try {
        const status = await fetchJSON(base + "/v1/edge/status", 2500);
        state.edges.set(base, { status, error: "", at: Date.now() });
      } catch (err) {
        const prev = state.edges.get(base);
        state.edges.set(base, { status: prev?.status ?? null, error: err.message || String(err), at: Date.now() });
      }
    }),
  );
  render.sites = true;
  schedule();
}

async function pollLinks() {
  try {
    const body = await api.get("/v1/links");
    state.links = body.links || [];
    state.linksAt = Date.now();
    state.apiError = "";
  } catch (err) {
    state.apiError = `links: ${err.message}`;
  }
  render.sites = render.station = true;
  schedule();
}

// --- views -----------------------------------------------------------------

function renderHeader() {
  $("tick").textContent = state.lastTick ? taiwanTime(state.lastTick) : "—";
  const online = state.live.size;
  $("counts").textContent = `${online} online / ${state.stations.size}`;
  let triggered = 0;
  for (const v of state.live.values()) if (v.alert) triggered++;
  $("triggered").textContent = String(triggered);
  const s = state.streamState;
  const el = $("entrance");
  el.dataset.state = s.connected ? "live" : s.failures > 0 || s.dropped ? "reconnecting" : "down";
  $("entrance-site").textContent = state.entrance || "—";
  $("entrance-url").textContent = stream.base.replace(/^https?:\/\//, "");
  $("entrance-state").textContent = s.connected
    ? s.switches > 0 ? `· live (switched ${s.switches}×)` : "· live"
    : `· reconnecting (${s.failures}/${stream.failuresToSwitch} failed)`;
  document.body.dataset.entrance = state.entrance;
  document.body.dataset.tick = String(state.lastTick);
}

function renderDetections() {
  const box = $("detections");
  const recs = [...state.alerts.values()].sort((a, b) => (b.alert.eq?.time ?? 0) - (a.alert.eq?.time ?? 0));
  if (recs.length === 0) {
    box.className = "empty";
    box.replaceChildren("No detection.");
    return;
  }
  box.className = "";
  box.replaceChildren(
    ...recs.map(({ alert: a, active }) => {
      const eq = a.eq || {};
      const max = Math.max(0, Math.min(9, Number(eq.max) || 0));
      return h("div", { class: "detection" + (active ? "" : " ended"), "data-id": a.id },
        h("div", { class: "head" },
          h("span", { class: "mag" }, `M${num(eq.mag, 1)}`),
          chip(max),
          h("span", {}, eq.loc || "—"),
          h("span", { class: "dim" }, active ? (a.final ? "final" : "active") : "ended")),
        h("div", { class: "dim small" },
          `${taiwanDateTime(Number(eq.time ?? a.time ?? 0))} · depth ${num(eq.depth, 0)} km · ` +
          `${num(eq.lat, 2)}°N ${num(eq.lon, 2)}°E · #${a.serial} · ${a.id}`));
    }),
  );
}

function renderReports() {
  const box = $("reports");
  const list = [...state.reports.values()].sort((a, b) => Number(b.time_ms) - Number(a.time_ms));
  if (list.length === 0) {
    box.className = "empty";
    box.replaceChildren("No report.");
    return;
  }
  box.className = "";
  box.replaceChildren(
    ...list.map((r) => {
      const max = Math.max(0, Math.min(9, Number(r.max_level) || 0));
      return h("div", { class: "report", "data-id": r.id },
        h("div", { class: "head" },
          h("span", { class: "mag" }, `M${num(r.magnitude, 1)}`),
          chip(max),
          h("span", {}, r.location || "—")),
        h("div", { class: "dim small" },
          `${taiwanDateTime(Number(r.time_ms))} · depth ${num(r.depth_km, 0)} km · ` +
          `${num(r.lat, 2)}°N ${num(r.lon, 2)}°E · ${r.id}`));
    }),
  );
}

function renderStation() {
  const box = $("station-info");
  const id = state.selected;
  $("waveform-state").textContent = id ? state.waveState : "";
  if (!id) return;
  const meta = state.stations.get(id) || { id };
  const snap = state.snapshot?.station?.[id];
  const rows = [
    ["station", `${meta.name || id} (${id})`],
    ["network · township", `${meta.net ?? "—"} · ${meta.code ?? "—"}`],
    ["location", meta.lat !== undefined ? `${num(meta.lat, 3)}°N ${num(meta.lon, 3)}°E` : "—"],
  ];
  const kv = h("dl", { class: "kv" });
  for (const [k, v] of rows) kv.append(h("dt", {}, k), h("dd", {}, v));
  if (snap) {
    kv.append(
      h("dt", {}, "intensity"),
      h("dd", {}, chip(level(snap.i)), ` i ${num(snap.i, 2)} · I ${num(snap.I, 2)}`, snap.alert ? " · triggered" : ""),
      h("dt", {}, "PGA · PGV"),
      h("dd", {}, `${num(snap.pga, 2)} gal · ${num(snap.pgv, 2)} cm/s`),
    );
  } else {
    kv.append(h("dt", {}, "state"), h("dd", { style: { color: OFFLINE } }, "offline"));
  }
  const links = state.links.filter((l) => l.station_id === id);
  for (const l of links) {
    kv.append(h("dt", {}, `uplink ${l.site}`), h("dd", {}, linkText(l)));
  }
  box.className = "";
  box.replaceChildren(kv);
}

function linkText(l) {
  const transport = String(l.transport || "").replace(/^TRANSPORT_/, "") || "—";
  const rtt = `${num(l.srtt_ms, 1)} ms`;
  const loss = `${(Number(l.recent_loss || 0) * 100).toFixed(1)} % loss`;
  const ref = state.lastTick || Date.now();
  const age = l.last_seen_ms ? Math.max(0, (ref - Number(l.last_seen_ms)) / 1000) : NaN;
  return `${transport} · ${rtt} · ${loss}${Number.isFinite(age) && age > 5 ? ` · silent ${age.toFixed(0)} s` : ""}`;
}

function renderAreas() {
  const box = $("areas");
  const snap = state.snapshot;
  const boxes = Object.entries(snap?.box || {}).sort((a, b) => b[1] - a[1]);
  const towns = (snap?.int || []).slice(0, 24);
  if (boxes.length === 0 && towns.length === 0) {
    box.className = "empty";
    box.replaceChildren("Quiet.");
    return;
  }
  box.className = "";
  box.replaceChildren(
    h("div", { class: "small dim" }, `${boxes.length} area${boxes.length === 1 ? "" : "s"} triggered (area · class)`),
    h("div", {}, ...boxes.map(([id, lvl]) => h("span", { class: "pair", title: `area ${id}` }, `${id} `, chip(Math.max(0, Math.min(9, lvl)))))),
    towns.length ? h("div", { class: "small dim", style: { marginTop: "4px" } }, "townships (postal code · class)") : null,
    h("div", {}, ...towns.map((t) => h("span", { class: "pair" }, `${t.code} `, chip(Math.max(0, Math.min(9, t.i)))))),
  );
}

function renderSites() {
  // Edges: what each says of itself.
  const edges = $("edges");
  const head = h("tr", {}, h("th", {}, "edge"), h("th", {}, "state"), h("th", {}, "cores (rts feeds)"), h("th", {}, "clients"));
  const rows = state.entrances.map((base) => {
    const e = state.edges.get(base);
    const st = e?.status;
    const name = st?.site || base.replace(/^https?:\/\//, "");
    const up = e && !e.error;
    const sources = (st?.sources || []).map((s) =>
      h("div", { class: s.connected ? (s.serving ? "ok" : "") : "bad" },
        `${s.site || s.target} ${s.serving ? "serving" : s.connected ? "standby" : "down"}`));
    const marks = [base === stream.base ? "stream" : null, base === api.base ? "API" : null].filter(Boolean).join(", ");
    return h("tr", { class: base === stream.base ? "here" : "" },
      h("td", {}, name, marks ? h("div", { class: "dim small" }, marks) : null),
      h("td", { class: up ? "ok" : "bad" }, up ? "up" : "down", up && st?.latest_tick_ms ? h("div", { class: "dim small" }, taiwanTime(Number(st.latest_tick_ms))) : null),
      h("td", {}, up ? sources : h("span", { class: "dim small" }, e ? e.error : "…")),
      h("td", {}, up ? String(st?.sse_clients ?? "—") : ""));
  });
  edges.replaceChildren(head, ...rows);

  // Cores: what the data API's link table says of each uplink.
  const cores = $("cores");
  const bySite = new Map();
  const ref = state.lastTick || Date.now();
  for (const l of state.links) {
    let c = bySite.get(l.site);
    if (!c) bySite.set(l.site, (c = { live: 0, udp: 0, ws: 0, rtts: [], loss: 0, n: 0 }));
    c.n++;
    const fresh = ref - Number(l.last_seen_ms || 0) < 5000;
    if (fresh) c.live++;
    if (String(l.transport).includes("UDP")) c.udp++;
    else if (String(l.transport).includes("WS")) c.ws++;
    if (fresh && l.srtt_ms !== undefined) c.rtts.push(Number(l.srtt_ms));
    c.loss += Number(l.recent_loss || 0);
  }
  const total = state.stations.size;
  const chead = h("tr", {}, h("th", {}, "core"), h("th", {}, "uplinks live"), h("th", {}, "UDP / WS"), h("th", {}, "RTT (median)"), h("th", {}, "loss"));
  const crows = [...bySite.keys()].sort().map((site) => {
    const c = bySite.get(site);
    c.rtts.sort((a, b) => a - b);
    const med = c.rtts.length ? c.rtts[Math.floor(c.rtts.length / 2)] : NaN;
    const cls = c.live === 0 ? "bad" : c.live < Math.max(total, c.n) ? "warn" : "ok";
    return h("tr", {},
      h("td", {}, site),
      h("td", { class: cls }, `${c.live} / ${Math.max(total, c.n)}`),
      h("td", {}, `${c.udp} / ${c.ws}`),
      h("td", {}, Number.isFinite(med) ? `${med.toFixed(1)} ms` : "—"),
      h("td", {}, `${((c.loss / Math.max(1, c.n)) * 100).toFixed(1)} %`));
  });
  cores.replaceChildren(chead, ...(crows.length ? crows : [h("tr", {}, h("td", { colspan: 5, class: "dim" }, "no link data yet"))]));
  $("api-state").textContent =
    `uplinks as the answering core's link table has them; data API via ${api.base.replace(/^https?:\/\//, "")}` +
    (state.apiError ? ` — ${state.apiError}` : "");
}

function renderLog() {
  $("log").replaceChildren(
    ...state.log.slice(-30).reverse().map((e) => h("li", {}, h("time", {}, taiwanTime(e.at, false)), e.msg)),
  );
}

function renderLegend() {
  $("legend").replaceChildren(
    ...CLASSES.map((c, i) => h("span", { class: "class", style: { background: COLOURS[i], color: TEXT[i] } }, c)),
    h("span", { class: "offline" }, "○ offline"),
  );
}

// --- start -------------------------------------------------------------------

// every runs fn now and then ms after each run ends, so a slow answer
// never piles up requests.
function every(ms, fn) {
  const run = async () => {
    try {
      await fn();
    } finally {
      setTimeout(run, ms);
    }
  };
  run();
}

renderLegend();
log(`page from ${state.site || location.host}; entrances ${state.entrances.join(", ")}`);
stream.start();
loadReports();
// Stations: every 5 s until the first answer, then every minute.
every(5000, () => (!state.stationsLoaded || Date.now() - stationsAt >= 60000 ? loadStations() : null));
every(2000, pollEdges);
every(5000, pollLinks);
schedule();

window.shindo = {
  // provisioned (active) stations known from the data API
  get stations() { return state.stations.size; },
  // stations in the latest snapshot
  get online() { return state.live.size; },
  // time of the latest tick shown (Unix ms) and how many ticks arrived
  get lastTick() { return state.lastTick; },
  get ticks() { return state.ticks; },
  get missedTicks() { return state.missedTicks; },
  // the edge serving the stream: its site (from the stream's info event) and base URL
  get entrance() { return state.entrance; },
  get entranceURL() { return stream.base; },
  get connected() { return stream.connected; },
  get switches() { return stream.switches; },
  get apiBase() { return api.base; },
  get detections() { return [...state.alerts.values()].map((r) => ({ ...r.alert, active: r.active })); },
  get reports() { return [...state.reports.values()]; },
  get selected() { return state.selected; },
  get waveform() { return { station: wave.station, chunks: wave.received, samples: wave.drawn, lastTime: wave.lastTime }; },
  get log() { return state.log.map((e) => e.msg); },
  get frames() { return map.frames; },
  // where a station is drawn, in viewport pixels (for clicking it)
  position(id) {
    const s = state.stations.get(id);
    if (!s) return null;
    const [x, y] = map.project(s.lon, s.lat);
    const r = $("map").getBoundingClientRect();
    return { x: r.left + x, y: r.top + y };
  },
  select,
  // the JMA class shown for a real-time intensity
  classOf: (i) => CLASSES[level(i)],
};

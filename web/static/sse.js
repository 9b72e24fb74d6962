// A Server-Sent Events client that follows the client rules of SPEC §7:
// on a drop it waits the server's `retry` (3 s) and reconnects to the same
// entrance, resuming after the last event it got; after three consecutive
// failed reconnects it switches to the next entrance and resumes there with
// `last_event_id=`.
//
// It reads the stream with fetch rather than EventSource, so that it knows
// whether an attempt was answered (a failed reconnect) or dropped later (a
// drop), reads the server's `retry:` itself, and decides alone when to go
// elsewhere. The position goes in the Last-Event-ID header to the page's own
// origin and as `last_event_id=` to another entrance, where a custom header
// would need a CORS preflight.

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
  });

export class Stream {
  // entrances: base URLs, the one to start with first. path: the stream's
  // path and query. onEvent({event, id, data, base}) gets every event;
  // onState(state) every change of connection. follow, if set, returns the
  // base URL to use for each attempt instead of switching by itself (a
  // secondary stream that goes where the main one goes).
  // giveUpOn lists HTTP statuses after which trying again is pointless (a
  // 404 for a station that does not exist).
  constructor({ entrances, path, onEvent, onState = () => {}, follow = null, giveUpOn = [], failuresToSwitch = 3, retry = 3000, silence = 30000 }) {
    this.entrances = entrances;
    this.path = path;
    this.onEvent = onEvent;
    this.onState = onState;
    this.follow = follow;
    this.giveUpOn = giveUpOn;
    this.failuresToSwitch = failuresToSwitch;
    this.retry = retry;
    this.silence = silence; // no byte for this long (keep-alives come every 15 s): a dead connection
    this.index = 0;
    this.failures = 0;
    this.switches = 0;
    this.lastId = "";
    this.connected = false;
    this.stopper = null;
  }

  // base is the entrance the stream uses now.
  get base() {
    return this.follow ? this.follow() : this.entrances[this.index];
  }

  start() {
    if (this.stopper) return;
    this.stopper = new AbortController();
    this.run(this.stopper.signal);
  }

  stop() {
    if (!this.stopper) return;
    this.stopper.abort();
    this.stopper = null;
    this.connected = false;
  }

  // restart drops the connection and reconnects at once (to a new base
  // from follow, or with a new path).
  restart() {
    this.stop();
    this.failures = 0;
    this.start();
  }

  state(extra) {
    this.onState({ base: this.base, connected: this.connected, failures: this.failures, switches: this.switches, ...extra });
  }

  async run(signal) {
    let switched = false;
    for (let first = true; !signal.aborted; first = false) {
      if (!first) {
        await sleep(this.retry, signal);
        if (signal.aborted) return;
      }
      const base = this.base;
      let opened = false;
      let error = null;
      try {
        opened = await this.connect(base, signal, () => {
          opened = true;
          this.failures = 0;
          this.connected = true;
          this.state({ switched });
          switched = false;
        });
      } catch (err) {
        error = err;
      }
      if (signal.aborted) return;
      this.connected = false;
      if (opened) {
        this.state({ dropped: true, error: error ? String(error.message || error) : "stream ended" });
        continue; // a drop starts a fresh count
      }
      if (error && this.giveUpOn.includes(error.status)) {
        this.state({ error: String(error.message), gaveUp: true });
        this.stop();
        return;
      }
      this.failures++;
      this.state({ error: error ? String(error.message || error) : "no stream" });
      if (!this.follow && this.failures >= this.failuresToSwitch && this.entrances.length > 1) {
        this.index = (this.index + 1) % this.entrances.length;
        this.failures = 0;
        this.switches++;
        switched = true;
        this.state({ switching: true });
      }
    }
  }

  // connect makes one attempt and reads the stream until it ends; it
  // returns true if the server answered with a stream, and throws if it
  // did not.
  async connect(base, stopSignal, onOpen) {
    const ctl = new AbortController();
    const abort = () => ctl.abort();
    stopSignal.addEventListener("abort", abort, { once: true });
    let watchdog = null;
    const pet = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(abort, this.silence);
    };
    try {
      const headers = { Accept: "text/event-stream" };
      let url = base + this.path;
      if (this.lastId) {
        if (base === location.origin) {
          headers["Last-Event-ID"] = this.lastId;
        } else {
          url += (url.includes("?") ? "&" : "?") + "last_event_id=" + encodeURIComponent(this.lastId);
        }
      }
      pet();
      const res = await fetch(url, { headers, cache: "no-store", signal: ctl.signal });
      const type = res.headers.get("content-type") || "";
      if (!res.ok || !type.startsWith("text/event-stream")) {
        if (res.status === 400) this.lastId = ""; // a position this edge refuses: start afresh
        let detail = "";
        try {
          detail = (await res.text()).slice(0, 200);
        } catch {
          // the body is only for the message
        }
        const err = new Error(`${res.status}${detail ? " " + detail : ""}`);
        err.status = res.status;
        throw err;
      }
      onOpen();
      await this.read(res.body, base, pet);
      return true;
    } finally {
      clearTimeout(watchdog);
      stopSignal.removeEventListener("abort", abort);
    }
  }

  // read parses the event stream (HTML Living Standard, 9.2.6).
  async read(body, base, pet) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    let ev = { event: "", data: [], id: null };
    const dispatch = () => {
      if (ev.id !== null) this.lastId = ev.id;
      if (ev.data.length > 0) {
        this.onEvent({ event: ev.event || "message", id: this.lastId, data: ev.data.join("\n"), base });
      }
      ev = { event: "", data: [], id: null };
    };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      pet();
      buf += value;
      const eol = /\r\n|\r|\n/g;
      let start = 0;
      for (let m; (m = eol.exec(buf)) !== null;) {
        if (m[0] === "\r" && m.index === buf.length - 1) break; // the \n may be in the next chunk
        const line = buf.slice(start, m.index);
        start = m.index + m[0].length;
        if (line === "") { dispatch(); continue; }
        if (line[0] === ":") continue; // keep-alive comment
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val[0] === " ") val = val.slice(1);
        switch (field) {
          case "event": ev.event = val; break;
          case "data": ev.data.push(val); break;
          case "id": if (!val.includes("\0")) ev.id = val; break;
          case "retry": if (/^\d+$/.test(val)) this.retry = Number(val); break;
        }
      }
      buf = buf.slice(start);
    }
  }
}

// The data API through a list of base URLs (the entrances), by the client
// rule of SPEC §7: a request goes to the current base URL; a connection
// error, a timeout or a 5xx moves to the next one and the request is tried
// there, once per URL; a 4xx never switches — every core would answer the
// same.

export class HTTPError extends Error {
  constructor(status, body, url) {
    super(`${url}: ${status}${body ? ": " + body.slice(0, 200) : ""}`);
    this.status = status;
  }
}

// fetchJSON makes one GET with a timeout and decodes the answer. Errors
// that another base URL may cure have retry set.
export async function fetchJSON(url, timeout = 5000) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeout);
  let res;
  try {
    res = await fetch(url, { cache: "no-store", signal: ctl.signal });
    if (!res.ok) {
      const err = new HTTPError(res.status, await res.text(), url);
      err.retry = res.status >= 500;
      throw err;
    }
    return await res.json();
  } catch (err) {
    if (!(err instanceof HTTPError)) err.retry = true; // connection error or timeout
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

export class DataAPI {
  constructor(bases, { timeout = 5000, onSwitch = () => {} } = {}) {
    this.bases = bases;
    this.timeout = timeout;
    this.onSwitch = onSwitch;
    this.current = 0;
  }

  get base() {
    return this.bases[this.current];
  }

  async get(path) {
    const start = this.current;
    let last;
    for (let i = 0; i < this.bases.length; i++) {
      const idx = (start + i) % this.bases.length;
      try {
        const out = await fetchJSON(this.bases[idx] + path, this.timeout);
        return out;
      } catch (err) {
        if (!err.retry) throw err;
        last = err;
        const next = (idx + 1) % this.bases.length;
        if (next !== this.current) {
          this.current = next;
          this.onSwitch(this.base, err);
        }
      }
    }
    throw last;
  }
}

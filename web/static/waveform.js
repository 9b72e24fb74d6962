// The live waveform of one station: the last 30 s of its three axes in
// gal, from the chunks of /v1/stream/waveform, each axis scaled to its own
// peak. Missing chunks leave gaps; redrawn once per animation frame.

const AXES = [
  { key: "ns", label: "NS", colour: "#7fd1ff" },
  { key: "ew", label: "EW", colour: "#b6f27f" },
  { key: "ud", label: "UD", colour: "#ffb86b" },
];

export class WaveformView {
  constructor(canvas, windowMs = 30000) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    this.windowMs = windowMs;
    this.chunks = []; // sorted by time: {time, rate, ns, ew, ud} (Float32Array, gal)
    this.station = null;
    this.received = 0; // chunks since the station was chosen
    this.drawn = 0; // samples per axis in the last frame drawn
    this.dirty = true;
    new ResizeObserver(() => { this.dirty = true; }).observe(canvas);
    const loop = () => {
      if (this.dirty) this.draw();
      requestAnimationFrame(loop);
    };
    requestAnimationFrame(loop);
  }

  reset(station) {
    this.station = station;
    this.chunks = [];
    this.received = 0;
    this.dirty = true;
  }

  // push adds one chunk: {station, time, rate, scale, ns, ew, ud} with
  // counts; scale is gal per count.
  push(c) {
    if (c.station !== this.station || !(c.rate > 0)) return;
    const scale = Number(c.scale) || 1;
    const chunk = { time: Number(c.time), rate: c.rate };
    for (const { key } of AXES) {
      const src = Array.isArray(c[key]) ? c[key] : [];
      const out = new Float32Array(src.length);
      for (let i = 0; i < src.length; i++) out[i] = src[i] * scale;
      chunk[key] = out;
    }
    // Usually in order; a resend after a reconnect may repeat or interleave.
    let i = this.chunks.length;
    while (i > 0 && this.chunks[i - 1].time > chunk.time) i--;
    if (i > 0 && this.chunks[i - 1].time === chunk.time) return;
    this.chunks.splice(i, 0, chunk);
    const newest = this.chunks[this.chunks.length - 1].time;
    while (this.chunks.length && this.chunks[0].time < newest - this.windowMs) this.chunks.shift();
    this.received++;
    this.dirty = true;
  }

  get lastTime() {
    return this.chunks.length ? this.chunks[this.chunks.length - 1].time : 0;
  }

  draw() {
    this.dirty = false;
    const r = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(1, r.width);
    const h = Math.max(1, r.height);
    if (this.canvas.width !== Math.round(w * dpr) || this.canvas.height !== Math.round(h * dpr)) {
      this.canvas.width = Math.round(w * dpr);
      this.canvas.height = Math.round(h * dpr);
    }
    const ctx = this.ctx;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#0b141e";
    ctx.fillRect(0, 0, w, h);
    ctx.font = "11px system-ui, sans-serif";
    if (!this.station) {
      ctx.fillStyle = "#7d8a99";
      ctx.fillText("Click a station on the map to see its waveform.", 10, h / 2);
      this.drawn = 0;
      return;
    }
    if (this.chunks.length === 0) {
      ctx.fillStyle = "#7d8a99";
      ctx.fillText(`Waiting for ${this.station}'s waveform…`, 10, h / 2);
      this.drawn = 0;
      return;
    }
    const last = this.chunks[this.chunks.length - 1];
    const end = last.time + (last.ns.length / last.rate) * 1000;
    const start = end - this.windowMs;
    const left = 34;
    const lane = h / AXES.length;
    const x = (t) => left + ((t - start) / this.windowMs) * (w - left - 4);
    let drawn = 0;
    AXES.forEach(({ key, label, colour }, n) => {
      let peak = 0;
      for (const c of this.chunks) for (const v of c[key]) peak = Math.max(peak, Math.abs(v));
      const amp = Math.max(peak, 0.05); // gal: keep noise from filling the lane
      const mid = lane * n + lane / 2;
      const k = (lane / 2 - 4) / amp;
      ctx.strokeStyle = "rgba(255,255,255,0.08)";
      ctx.beginPath();
      ctx.moveTo(left, mid);
      ctx.lineTo(w, mid);
      ctx.stroke();
      ctx.strokeStyle = colour;
      ctx.lineWidth = 1;
      ctx.beginPath();
      let prevEnd = null;
      let count = 0;
      for (const c of this.chunks) {
        const step = 1000 / c.rate;
        const s = c[key];
        for (let i = 0; i < s.length; i++) {
          const t = c.time + i * step;
          const px = x(t);
          const py = mid - s[i] * k;
          if (i === 0 && (prevEnd === null || Math.abs(c.time - prevEnd) > step)) ctx.moveTo(px, py);
          else ctx.lineTo(px, py);
        }
        prevEnd = c.time + s.length * step;
        count += s.length;
      }
      ctx.stroke();
      drawn = Math.max(drawn, count);
      ctx.fillStyle = colour;
      ctx.fillText(label, 4, mid - 2);
      ctx.fillStyle = "#8fa0b2";
      ctx.fillText(fmtGal(peak), 4, mid + 11);
    });
    this.drawn = drawn;
  }
}

function fmtGal(v) {
  return v >= 10 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toFixed(2);
}

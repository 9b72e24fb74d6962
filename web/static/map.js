// The station map: one canvas, redrawn at most once per animation frame
// and only when something changed, so a thousand stations at two ticks a
// second cost a few batched paths per frame. The land is drawn once per
// view into an offscreen canvas.

import { AREAS, LAT_EDGES, LON_EDGES } from "./grid.js";
import { COLOURS, OFFLINE } from "./intensity.js";

// The default view: the area grid with a margin.
const HOME = { west: LON_EDGES[0] - 0.15, east: LON_EDGES[LON_EDGES.length - 1] + 0.15, south: LAT_EDGES[LAT_EDGES.length - 1] - 0.1, north: LAT_EDGES[0] + 0.15 };
const COS = Math.cos((23.7 * Math.PI) / 180); // equirectangular, true at the middle of Taiwan

export class StationMap {
  // basemap: the generated land (basemap.js); onSelect(id) when a station
  // is clicked.
  constructor(canvas, basemap, onSelect) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    this.land = decode(basemap);
    this.onSelect = onSelect;
    this.stations = []; // [{id, lon, lat}], from the data API
    this.live = new Map(); // id → {level, alert}, from the latest snapshot
    this.boxes = new Map(); // area ID → level
    this.selected = null;
    this.view = null; // {lon, lat, scale: px per degree of latitude}
    this.width = 0;
    this.height = 0;
    this.dirty = true;
    this.baseDirty = true;
    this.base = document.createElement("canvas");
    this.frames = 0;

    new ResizeObserver(() => this.resize()).observe(canvas);
    this.resize();
    this.bindPointer();
    const loop = () => {
      if (this.dirty) this.draw();
      requestAnimationFrame(loop);
    };
    requestAnimationFrame(loop);
  }

  setStations(list) {
    this.stations = list;
    this.dirty = true;
  }

  // update takes a snapshot's stations ({id: {level, alert}}) and boxes.
  update(live, boxes) {
    this.live = live;
    this.boxes = boxes;
    this.dirty = true;
  }

  select(id) {
    this.selected = id;
    this.dirty = true;
  }

  resize() {
    const r = this.canvas.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    this.width = Math.max(1, r.width);
    this.height = Math.max(1, r.height);
    for (const c of [this.canvas, this.base]) {
      c.width = Math.round(this.width * dpr);
      c.height = Math.round(this.height * dpr);
    }
    this.dpr = dpr;
    if (!this.view || !this.moved) this.home();
    this.baseDirty = this.dirty = true;
  }

  home() {
    const sx = this.width / ((HOME.east - HOME.west) * COS);
    const sy = this.height / (HOME.north - HOME.south);
    this.view = { lon: (HOME.west + HOME.east) / 2, lat: (HOME.south + HOME.north) / 2, scale: Math.min(sx, sy) };
    this.minScale = this.view.scale * 0.75;
    this.moved = false;
    this.baseDirty = this.dirty = true;
  }

  // project returns canvas CSS pixels of a point.
  project(lon, lat) {
    const v = this.view;
    return [this.width / 2 + (lon - v.lon) * v.scale * COS, this.height / 2 - (lat - v.lat) * v.scale];
  }

  unproject(x, y) {
    const v = this.view;
    return [v.lon + (x - this.width / 2) / (v.scale * COS), v.lat - (y - this.height / 2) / v.scale];
  }

  radius() {
    return Math.max(3, Math.min(8, this.view.scale / 60));
  }

  // stationAt returns the ID of the station nearest to a canvas point,
  // within a few pixels.
  stationAt(x, y) {
    let best = null;
    let bestD = (this.radius() + 4) ** 2;
    for (const s of this.stations) {
      const [px, py] = this.project(s.lon, s.lat);
      const d = (px - x) ** 2 + (py - y) ** 2;
      if (d <= bestD) {
        best = s.id;
        bestD = d;
      }
    }
    return best;
  }

  bindPointer() {
    const c = this.canvas;
    let drag = null;
    c.addEventListener("pointerdown", (e) => {
      drag = { x: e.offsetX, y: e.offsetY, lon: this.view.lon, lat: this.view.lat, moved: false };
    });
    c.addEventListener("pointermove", (e) => {
      if (drag && e.buttons) {
        const dx = e.offsetX - drag.x;
        const dy = e.offsetY - drag.y;
        if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
        if (drag.moved) {
          this.view.lon = drag.lon - dx / (this.view.scale * COS);
          this.view.lat = drag.lat + dy / this.view.scale;
          this.moved = true;
          this.baseDirty = this.dirty = true;
        }
        return;
      }
      c.style.cursor = this.stationAt(e.offsetX, e.offsetY) ? "pointer" : "";
    });
    c.addEventListener("pointerup", (e) => {
      const wasDrag = drag && drag.moved;
      drag = null;
      if (!wasDrag) {
        const id = this.stationAt(e.offsetX, e.offsetY);
        if (id) this.onSelect(id);
      }
    });
    c.addEventListener("wheel", (e) => {
      e.preventDefault();
      const [lon, lat] = this.unproject(e.offsetX, e.offsetY);
      const f = Math.exp(-e.deltaY * 0.0015);
      this.view.scale = Math.max(this.minScale, Math.min(20000, this.view.scale * f));
      // keep the point under the pointer where it is
      const [x2, y2] = this.project(lon, lat);
      this.view.lon += (x2 - e.offsetX) / (this.view.scale * COS);
      this.view.lat -= (y2 - e.offsetY) / this.view.scale;
      this.moved = true;
      this.baseDirty = this.dirty = true;
    }, { passive: false });
    c.addEventListener("dblclick", () => this.home());
  }

  drawBase() {
    const ctx = this.base.getContext("2d");
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.fillStyle = "#0d1b2a";
    ctx.fillRect(0, 0, this.width, this.height);
    for (const country of this.land) {
      ctx.beginPath();
      for (const ring of country.rings) {
        for (let i = 0; i < ring.length; i += 2) {
          const [x, y] = this.project(ring[i], ring[i + 1]);
          if (i === 0) ctx.moveTo(x, y);
          else ctx.lineTo(x, y);
        }
        ctx.closePath();
      }
      ctx.fillStyle = country.name === "Taiwan" ? "#27323f" : "#1d2631";
      ctx.fill();
      ctx.strokeStyle = "#4b5d70";
      ctx.lineWidth = 0.8;
      ctx.stroke();
    }
    // The area grid, faint.
    ctx.strokeStyle = "rgba(150,170,190,0.13)";
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (const a of AREAS.values()) {
      const [x0, y0] = this.project(a.west, a.north);
      const [x1, y1] = this.project(a.east, a.south);
      ctx.rect(x0, y0, x1 - x0, y1 - y0);
    }
    ctx.stroke();
    this.baseDirty = false;
  }

  draw() {
    this.dirty = false;
    this.frames++;
    if (this.baseDirty) this.drawBase();
    const ctx = this.ctx;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.drawImage(this.base, 0, 0);
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);

    // Triggered areas.
    for (const [id, lvl] of this.boxes) {
      const a = AREAS.get(id);
      if (!a) continue;
      const [x0, y0] = this.project(a.west, a.north);
      const [x1, y1] = this.project(a.east, a.south);
      const colour = COLOURS[Math.max(0, Math.min(9, lvl))];
      ctx.globalAlpha = 0.28;
      ctx.fillStyle = colour;
      ctx.fillRect(x0, y0, x1 - x0, y1 - y0);
      ctx.globalAlpha = 0.9;
      ctx.strokeStyle = colour;
      ctx.lineWidth = 1.5;
      ctx.strokeRect(x0 + 0.75, y0 + 0.75, x1 - x0 - 1.5, y1 - y0 - 1.5);
    }
    ctx.globalAlpha = 1;

    // Stations, batched by class: offline first, then quiet ones weakest to
    // strongest, then the triggered ones (larger, outlined in white) so the
    // strong ones are on top.
    const r = this.radius();
    const quiet = Array.from({ length: 10 }, () => []);
    const triggered = Array.from({ length: 10 }, () => []);
    const offline = [];
    let selected = null;
    for (const s of this.stations) {
      const [x, y] = this.project(s.lon, s.lat);
      if (x < -2 * r || y < -2 * r || x > this.width + 2 * r || y > this.height + 2 * r) continue;
      if (s.id === this.selected) selected = [x, y];
      const v = this.live.get(s.id);
      if (!v) offline.push(x, y);
      else (v.alert ? triggered : quiet)[v.level].push(x, y);
    }
    const dots = (pts, fill, stroke, rad) => {
      if (pts.length === 0) return;
      ctx.beginPath();
      for (let i = 0; i < pts.length; i += 2) {
        ctx.moveTo(pts[i] + rad, pts[i + 1]);
        ctx.arc(pts[i], pts[i + 1], rad, 0, 2 * Math.PI);
      }
      if (fill) {
        ctx.fillStyle = fill;
        ctx.fill();
      }
      if (stroke) {
        ctx.strokeStyle = stroke;
        ctx.stroke();
      }
    };
    ctx.lineWidth = 1;
    dots(offline, "#20252c", OFFLINE, r * 0.8);
    quiet.forEach((pts, lvl) => dots(pts, COLOURS[lvl], "rgba(0,0,0,0.7)", r));
    ctx.lineWidth = 1.2;
    triggered.forEach((pts, lvl) => dots(pts, COLOURS[lvl], "#ffffff", r * 1.35));
    if (selected) {
      ctx.lineWidth = 2;
      dots(selected, null, "#00ffd0", r + 5);
    }
  }
}

// decode turns the generated rings back into degrees.
function decode(basemap) {
  const k = 1 / basemap.scale;
  return basemap.land.map((c) => ({
    name: c.name,
    rings: c.rings.map((enc) => {
      const out = new Float64Array(enc.length);
      let x = 0;
      let y = 0;
      for (let i = 0; i < enc.length; i += 2) {
        x += enc[i];
        y += enc[i + 1];
        out[i] = x * k;
        out[i + 1] = y * k;
      }
      return out;
    }),
  }));
}

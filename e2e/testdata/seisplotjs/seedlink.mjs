// Reads live records over SeedLink with seisplotjs's own clients — the
// SeedLink 3 one (seedlink.SeedlinkConnection, subprotocol "SeedLink3.1")
// or the SeedLink 4 one (seedlink4.SeedlinkConnection, "SeedLink4.0") —
// as an application does when its server goes away: it reads from WS_A
// until that connection closes (it prints {"ready":N} once it holds N_A
// records, for e2e/seedlink_test.go to kill the core serving it), then
// reconnects to WS_B resuming after the last sequence number it got, and
// reads N_B more. It prints every record as JSON for the test to check
// against the REST Query and for gaps and repeats.
//
// The SeedLink 4 client asks for miniSEED 2 from WS_A and, with the ":3"
// filter, miniSEED 3 from WS_B: seisplotjs parses those payloads with its
// own miniSEED 3 reader (asMiniseed3), and each record's CRC is checked
// with its calcCrc, which recomputes it from the record as it re-writes it.
//
// Usage: node --experimental-websocket seedlink.mjs PROTO WS_A WS_B NET STA N_A N_B
//
// The set-up is station.mjs's: jsdom's globals before seisplotjs is
// imported. Node 20's WebSocket is behind --experimental-websocket.
import { JSDOM } from "jsdom";

const { window } = new JSDOM("");
for (const name of ["window", "document", "customElements", "HTMLElement", "HTMLDivElement", "DOMParser", "Node", "Element"]) {
  globalThis[name] = name === "window" ? window : window[name];
}
console.log = console.error;
const { seedlink, seedlink4 } = await import("seisplotjs");

const [proto, urlA, urlB, net, sta, nA, nB] = process.argv.slice(2);

// One record as the test compares it.
const describe = (seq, rec) => ({
  seq: seq.toString(),
  format: "2",
  channel: rec.header.chanCode,
  station: `${rec.header.netCode}_${rec.header.staCode}`,
  start: rec.header.startTime.toMillis(),
  rate: rec.header.sampleRate,
  y: Array.from(rec.decompress()),
});

// describe3 is describe for a miniSEED 3 record, whose identifier is
// FDSN:NET_STA_LOC_B_S_SS.
const describe3 = (seq, rec) => {
  const [net, sta, , band, source, subsource] = rec.header.identifier.replace(/^FDSN:/, "").split("_");
  return {
    seq: seq.toString(),
    format: "3",
    crcOK: rec.calcCrc() === rec.header.crc,
    channel: band + source + subsource,
    station: `${net}_${sta}`,
    start: rec.header.start.toMillis(),
    rate: rec.header.sampleRate,
    y: Array.from(rec.decompress()),
  };
};

// read connects and takes records from resume on (null: from now): until
// it holds n and closes, or with untilClosed until the server closes
// (announcing when it holds n).
const read = (url, n, resume, untilClosed) =>
  new Promise((resolve, reject) => {
    const got = [];
    let conn;
    const timer = setTimeout(() => {
      conn.close();
      reject(new Error(`${url}: ${got.length} records in 60 s, connection still open`));
    }, 60_000);
    const done = () => {
      clearTimeout(timer);
      resolve(got);
    };
    const take = (record) => {
      if (!untilClosed && got.length >= n) return;
      got.push(record);
      if (got.length === n) {
        if (untilClosed) {
          process.stdout.write(JSON.stringify({ ready: n }) + "\n");
        } else {
          conn.close();
          done();
        }
      }
    };
    const fail = (err) => {
      clearTimeout(timer);
      reject(err);
    };
    if (proto === "3") {
      conn = new seedlink.SeedlinkConnection(url, [`STATION ${sta} ${net}`, "SELECT 00BNZ.D"], (p) => take(describe(p.sequence, p.miniseed)), fail);
      if (resume !== null) {
        // The connection's final command, after the STATION and SELECT.
        conn.command = "DATA " + (Number(resume) & 0xffffff).toString(16).toUpperCase().padStart(6, "0");
      }
    } else {
      const data = resume === null ? "DATA" : `DATA ${resume}`;
      const select = resume === null ? "SELECT 00_B_N_Z" : "SELECT 00_B_N_Z:3";
      const payload = (p) => (p.dataFormat === "3" ? describe3(p.sequence, p.asMiniseed3()) : describe(p.sequence, p.asMiniseed()));
      conn = new seedlink4.SeedlinkConnection(url, [`STATION ${net}_${sta}`, select, data], (p) => take(payload(p)), fail);
    }
    if (untilClosed) {
      conn.setOnClose(() => (got.length >= n ? done() : fail(new Error(`${url} closed after ${got.length} records`))));
    }
    conn.connect();
  });

const first = await read(urlA, Number(nA), null, true);
const last = BigInt(first[first.length - 1].seq);
const next = proto === "3" ? (last + 1n) & 0xffffffn : last + 1n;
const second = await read(urlB, Number(nB), next.toString(), false);
window.close();
process.stdout.write(JSON.stringify({ first, second }) + "\n", () => process.exit(0));

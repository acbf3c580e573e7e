/**
 * Soak: many subscribers of which some stall (issue 6 item 3: 1,000 subscribers, 10% stall,
 * 10 minutes, RSS flat). Not part of the test suite (its 15-second smoke variant is).
 *
 *   deno task soak -- [--subscribers 1000] [--stalled 100] [--seconds 600] [--rate 20]
 *                     [--payload 200] [--cap-kib 64] [--timeout-ms 2000] [--sample-seconds 10]
 *
 * Starts the gateway as its own process (`deno run -P=gateway main.ts run`, embedded backend,
 * store `data/soak-<id>.db`, removed afterwards) with explicit caps, connects `--subscribers`
 * clients to one topic at QoS 1, of which `--stalled` never read their socket after sending
 * CONNECT + SUBSCRIBE: each stalled client only writes a PINGREQ every 2 s (which fails once
 * the gateway has evicted it; it then reconnects with the same client id, resubscribes and
 * stalls again). The others read and PUBACK everything. One QoS 1 publisher sends at a steady
 * `--rate` for `--seconds`; each payload carries its sequence number so every reader's lag is
 * known. The gateway's RSS (/proc/<pid>/status VmRSS) is sampled every `--sample-seconds`.
 *
 * Pass criteria (exit 1 otherwise):
 * - RSS flat: over the second half of the run, the least-squares growth (slope × half
 *   duration) is below 5% of the half's mean RSS, and max − min is below 10% of that mean;
 * - readers keep up: in every minute every reader's delivery rate is ≥ 90% of that minute's
 *   publish rate, no reader is disconnected, and after publishing stops every reader has
 *   every acknowledged message within 10 s.
 *
 * The machine this runs on is shared: 1,000 × 20 msg/s ≈ 18k deliveries/s is the default load.
 * Loopback only; every loop is bounded by the run's deadline.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { connectPacket, subscribePacket, varint } from "../helpers/gateway.ts";

/** Options of one soak run. */
export interface SoakOptions {
  subscribers: number;
  stalled: number;
  seconds: number;
  /** Publishes per second. */
  rate: number;
  /** Payload bytes (≥ 10: the sequence number). */
  payload: number;
  /** max_outbound_queue_bytes_per_client, KiB. */
  capKiB: number;
  /** slow_consumer_timeout_ms. */
  timeoutMs: number;
  sampleSeconds: number;
  /** Progress lines (default: none). */
  log?: (line: string) => void;
}

/** One RSS sample. */
export interface Sample {
  /** Seconds since publishing started. */
  t: number;
  rssBytes: number;
  evictions: number;
  connections: number;
  queuedBytes: number;
}

/** Figures of one window (a minute, or the run if shorter). */
export interface Window {
  from: number;
  to: number;
  /** Acknowledged publishes per second. */
  publishRate: number;
  /** Deliveries per second per reader: lowest and mean. */
  minReaderRate: number;
  avgReaderRate: number;
  /** All readers together. */
  deliveriesPerSec: number;
  /** Gateway RSS at the window's end and the highest sample in it. */
  rssEnd: number;
  rssMax: number;
  evictions: number;
  stalledReconnects: number;
}

/** What a soak run measured. */
export interface SoakResult {
  options: Omit<SoakOptions, "log">;
  samples: Sample[];
  windows: Window[];
  secondHalf: {
    mean: number;
    min: number;
    max: number;
    /** Least-squares slope, bytes per minute. */
    slopePerMin: number;
    /** Slope × half duration as a fraction of the mean. */
    growthFraction: number;
    /** (max − min) / mean. */
    spreadFraction: number;
  };
  rssFlat: boolean;
  published: number;
  acked: number;
  /** Whole run: per-reader delivery rate, lowest and mean; acked publish rate. */
  minReaderRate: number;
  avgReaderRate: number;
  publishRate: number;
  /** Highest lag (messages behind the last acked publish) seen at any sample. */
  maxLag: number;
  /** Readers missing messages after the drain, readers disconnected. */
  readersIncomplete: number;
  readersClosed: number;
  readersKeptUp: boolean;
  /** From the gateway's metric, and the stalled clients' own count of reconnects. */
  evictions: number;
  stalledReconnects: number;
  drainMs: number;
  pass: boolean;
}

export const DEFAULTS: Omit<SoakOptions, "log"> = {
  subscribers: 1000,
  stalled: 100,
  seconds: 600,
  rate: 20,
  payload: 200,
  capKiB: 64,
  timeoutMs: 2000,
  sampleSeconds: 10,
};

const TOPIC = "building/north/room/42/temp";
const SEQ_DIGITS = 10;
const PROBE_MS = 2000;
const DRAIN_MS = 10_000;
const MiB = 1048576;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

function rssOf(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

async function metrics(httpPort: number): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (m) out.set(m[1], (out.get(m[1]) ?? 0) + Number(m[3]));
  }
  return out;
}

async function writeAll(conn: Deno.Conn, b: Uint8Array): Promise<void> {
  let off = 0;
  while (off < b.length) off += await conn.write(b.subarray(off));
}

/**
 * Splits a byte stream into MQTT packets and hands each (type byte, body start, body end)
 * to `on`; keeps a partial packet for the next chunk. Copies only when a packet straddles
 * two reads.
 */
class PacketSplitter {
  #rest: Uint8Array | null = null;

  feed(chunk: Uint8Array, on: (buf: Uint8Array, first: number, from: number, to: number) => void) {
    let buf = chunk;
    if (this.#rest) {
      buf = new Uint8Array(this.#rest.length + chunk.length);
      buf.set(this.#rest);
      buf.set(chunk, this.#rest.length);
      this.#rest = null;
    }
    let at = 0;
    while (buf.length - at >= 2) {
      let len = 0;
      let mult = 1;
      let i = at + 1;
      let complete = false;
      while (i < buf.length && i < at + 5) {
        len += (buf[i] & 0x7f) * mult;
        mult *= 128;
        if ((buf[i++] & 0x80) === 0) {
          complete = true;
          break;
        }
      }
      if (!complete || i + len > buf.length) break;
      on(buf, buf[at], i, i + len);
      at = i + len;
    }
    if (at < buf.length) this.#rest = buf.slice(at);
  }
}

/** A subscriber that reads and PUBACKs everything, keeping count and the last sequence. */
class Reader {
  received = 0;
  lastSeq = 0;
  outOfOrder = 0;
  closed = false;
  #conn: Deno.TcpConn;
  #split = new PacketSplitter();
  #suback!: () => void;
  readonly subscribed: Promise<void>;
  readonly done: Promise<void>;

  constructor(conn: Deno.TcpConn) {
    this.#conn = conn;
    this.subscribed = new Promise((r) => this.#suback = r);
    this.done = this.#loop();
  }

  static async start(port: number, hello: Uint8Array): Promise<Reader> {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    const r = new Reader(conn);
    await writeAll(conn, hello);
    await r.subscribed;
    return r;
  }

  close(): void {
    try {
      this.#conn.close();
    } catch { /* closed */ }
  }

  async #loop(): Promise<void> {
    const chunk = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await this.#conn.read(chunk);
        if (n === null) break;
        const acks: number[] = [];
        this.#split.feed(chunk.subarray(0, n), (b, first, from) => {
          const type = first >> 4;
          if (type === 3) {
            let p = from + 2 + ((b[from] << 8) | b[from + 1]);
            if ((first >> 1) & 3) {
              acks.push(0x40, 2, b[p], b[p + 1]);
              p += 2;
            }
            let seq = 0;
            for (let k = 0; k < SEQ_DIGITS; k++) seq = seq * 10 + b[p + k] - 48;
            if (seq !== this.lastSeq + 1) this.outOfOrder++;
            if (seq > this.lastSeq) this.lastSeq = seq;
            this.received++;
          } else if (type === 9) this.#suback();
        });
        if (acks.length > 0) await writeAll(this.#conn, new Uint8Array(acks));
      }
    } catch { /* closed */ }
    this.closed = true;
    this.#suback(); // never leave start() waiting on a dead connection
  }
}

/**
 * A stalled subscriber slot: connects, sends CONNECT + SUBSCRIBE, never reads. A PINGREQ every
 * 2 s is its only traffic; once the gateway has closed the connection the write fails (RST),
 * and the slot reconnects with the same client id. Runs until `until()` is false.
 */
async function stalledSlot(
  port: number,
  hello: Uint8Array,
  until: () => boolean,
  counts: { reconnects: number; connectErrors: number },
): Promise<void> {
  const ping = new Uint8Array([0xc0, 0]);
  let first = true;
  while (until()) {
    let conn: Deno.TcpConn;
    try {
      conn = await Deno.connect({ hostname: "127.0.0.1", port });
      await writeAll(conn, hello);
    } catch {
      counts.connectErrors++;
      await sleep(500);
      continue;
    }
    if (!first) counts.reconnects++;
    first = false;
    // Spread the probes so 100 slots do not write in lockstep.
    await sleep(Math.random() * PROBE_MS);
    try {
      while (until()) {
        await writeAll(conn, ping);
        await sleep(PROBE_MS);
      }
    } catch { /* evicted: reconnect */ }
    try {
      conn.close();
    } catch { /* closed */ }
  }
}

/** A steady QoS 1 publisher from one pre-encoded template (packet id and sequence patched). */
class Publisher {
  published = 0;
  acked = 0;
  #conn: Deno.TcpConn;
  #template: Uint8Array;
  #idAt: number;
  #seqAt: number;
  #split = new PacketSplitter();
  #id = 0;
  readonly done: Promise<void>;

  private constructor(conn: Deno.TcpConn, payloadBytes: number) {
    this.#conn = conn;
    const t = new TextEncoder().encode(TOPIC);
    const bodyLen = 2 + t.length + 2 + payloadBytes;
    const head = [0x32, ...varint(bodyLen), t.length >> 8, t.length & 0xff];
    this.#template = new Uint8Array(head.length - 2 + bodyLen);
    this.#template.set(head);
    this.#template.set(t, head.length);
    this.#idAt = head.length + t.length;
    this.#seqAt = this.#idAt + 2;
    this.#template.fill(0x70, this.#seqAt); // "p"
    this.done = this.#readAcks();
  }

  static async start(port: number, payloadBytes: number): Promise<Publisher> {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    await writeAll(conn, connectPacket(`soak-pub-${Deno.pid}`));
    return new Publisher(conn, payloadBytes);
  }

  /** Sends the next `n` messages in one write. */
  async send(n: number): Promise<void> {
    const size = this.#template.length;
    const out = new Uint8Array(n * size);
    for (let k = 0; k < n; k++) {
      const at = k * size;
      out.set(this.#template, at);
      this.#id = this.#id === 65535 ? 1 : this.#id + 1;
      out[at + this.#idAt] = this.#id >> 8;
      out[at + this.#idAt + 1] = this.#id & 0xff;
      let seq = this.published + k + 1;
      for (let d = SEQ_DIGITS - 1; d >= 0; d--) {
        out[at + this.#seqAt + d] = 48 + (seq % 10);
        seq = Math.floor(seq / 10);
      }
    }
    await writeAll(this.#conn, out);
    this.published += n;
  }

  close(): void {
    try {
      this.#conn.close();
    } catch { /* closed */ }
  }

  async #readAcks(): Promise<void> {
    const chunk = new Uint8Array(16 * 1024);
    try {
      for (;;) {
        const n = await this.#conn.read(chunk);
        if (n === null) return;
        this.#split.feed(chunk.subarray(0, n), (_b, first) => {
          if (first === 0x40) this.acked++;
        });
      }
    } catch { /* closed */ }
  }
}

/** Least-squares slope of y over x. */
function slope(xs: number[], ys: number[]): number {
  const n = xs.length;
  if (n < 2) return 0;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i] - mx) * (ys[i] - my);
    den += (xs[i] - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/** Runs one soak; the gateway process and its store are gone when it resolves. */
export async function runSoak(o: SoakOptions): Promise<SoakResult> {
  const log = o.log ?? (() => {});
  if (o.payload < SEQ_DIGITS) throw new Error(`--payload must be >= ${SEQ_DIGITS}`);
  if (o.stalled > o.subscribers) throw new Error("--stalled must be <= --subscribers");
  const root = new URL("../../", import.meta.url).pathname;
  const id = `${Deno.pid}-${Date.now()}`;
  const dbPrefix = `soak-${id}`;
  await Deno.mkdir(`${root}data`, { recursive: true });
  const mqttPort = freePort();
  const httpPort = freePort();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-P=gateway", "main.ts", "run"],
    cwd: root,
    env: {
      IGGY_MQTT_LISTENERS_TCP: `127.0.0.1:${mqttPort}`,
      IGGY_MQTT_LISTENERS_TLS: "",
      IGGY_MQTT_LISTENERS_HTTP: `127.0.0.1:${httpPort}`,
      IGGY_MQTT_LISTENERS_WS: "", // the quick start config binds 8083
      IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "true",
      IGGY_MQTT_LOG_AUTO_CREATE: "true",
      IGGY_MQTT_GATEWAY_BACKEND: "embedded",
      IGGY_MQTT_EMBEDDED_PATH: `data/${dbPrefix}.db`,
      IGGY_MQTT_GATEWAY_LOG_LEVEL: "warn",
      IGGY_MQTT_LIMITS_MAX_CONNECTION_RATE_PER_SOURCE: "0",
      IGGY_MQTT_LIMITS_MAX_OUTBOUND_QUEUE_BYTES_PER_CLIENT: String(o.capKiB * 1024),
      IGGY_MQTT_LIMITS_SLOW_CONSUMER_TIMEOUT_MS: String(o.timeoutMs),
    },
    stdout: Deno.env.get("SOAK_LOG") ? "inherit" : "null",
    stderr: "inherit",
  }).spawn();

  let childExit: string | null = null;
  const childStatus = child.status.then((st) => {
    childExit = `code ${st.code}${st.signal ? `, signal ${st.signal}` : ""}`;
  });
  const readers: Reader[] = [];
  let publisher: Publisher | null = null;
  let stalling = true;
  const stalledCounts = { reconnects: 0, connectErrors: 0 };
  const slots: Promise<void>[] = [];
  try {
    for (let i = 0;; i++) {
      try {
        if ((await fetch(`http://127.0.0.1:${httpPort}/ready`)).status === 200) break;
      } catch { /* not yet */ }
      if (i > 300) throw new Error("gateway did not become ready within 30 s");
      await sleep(100);
    }
    log(`gateway pid ${child.pid} ready; idle RSS ${(rssOf(child.pid) / MiB).toFixed(1)} MiB`);

    // --- subscribers: readers in batches of 50, then the stalled slots ----------------------
    const nReaders = o.subscribers - o.stalled;
    for (let i = 0; i < nReaders; i += 50) {
      const batch = [];
      for (let k = i; k < Math.min(nReaders, i + 50); k++) {
        const hello = new Uint8Array([
          ...connectPacket(`soak-r-${k}`),
          ...subscribePacket(1, [[TOPIC, 1]]),
        ]);
        batch.push(Reader.start(mqttPort, hello));
      }
      readers.push(...await Promise.all(batch));
    }
    const closedEarly = readers.filter((r) => r.closed).length;
    if (closedEarly > 0) throw new Error(`${closedEarly} readers closed before SUBACK`);
    const deadline = performance.now() + (o.seconds + 5) * 1000 + (o.stalled / 50) * 1000;
    const stalledUntil = () => stalling && performance.now() < deadline;
    for (let k = 0; k < o.stalled; k++) {
      const hello = new Uint8Array([
        ...connectPacket(`soak-s-${k}`),
        ...subscribePacket(1, [[TOPIC, 1]]),
      ]);
      slots.push(stalledSlot(mqttPort, hello, stalledUntil, stalledCounts));
      if (k % 50 === 49) await sleep(200);
    }
    await sleep(1000);
    log(
      `${nReaders} readers and ${o.stalled} stalled connected; RSS ${
        (rssOf(child.pid) / MiB).toFixed(1)
      } MiB`,
    );

    // --- publisher: every 10 ms, what is due; never more than 60 unacknowledged ---------------
    publisher = await Publisher.start(mqttPort, o.payload);
    const pub = publisher;
    const m0 = await metrics(httpPort);
    const evictions0 = m0.get("mqtt_slow_consumer_evictions_total") ?? 0;
    const started = performance.now();
    const runMs = o.seconds * 1000;
    let publishing = true;
    let behindPublisher = 0;
    let publishError: string | null = null;
    const pubLoop = (async () => {
      for (let tick = 1; publishing && performance.now() - started < runMs; tick++) {
        const due = Math.floor((performance.now() - started) * o.rate / 1000) - pub.published;
        const room = 60 - (pub.published - pub.acked);
        const n = Math.min(due, room);
        if (due > room) behindPublisher++;
        if (n > 0) {
          try {
            await pub.send(n);
          } catch (e) {
            publishError = e instanceof Error ? e.message : String(e);
            return;
          }
        }
        await sleep(Math.max(0, started + tick * 10 - performance.now()));
      }
    })();

    // --- sampling -----------------------------------------------------------------------------
    const samples: Sample[] = [];
    const windows: Window[] = [];
    let maxLag = 0;
    const windowSec = Math.min(60, o.seconds);
    let wStart = {
      t: 0,
      acked: 0,
      recv: readers.map((r) => r.received),
      evictions: evictions0,
      reconnects: stalledCounts.reconnects,
      firstSample: 0,
    };
    const takeSample = async (t: number) => {
      const m = await metrics(httpPort);
      const s: Sample = {
        t,
        rssBytes: rssOf(child.pid),
        evictions: (m.get("mqtt_slow_consumer_evictions_total") ?? 0) - evictions0,
        connections: m.get("mqtt_connections") ?? 0,
        queuedBytes: m.get("mqtt_outbound_queue_bytes") ?? 0,
      };
      samples.push(s);
      for (const r of readers) maxLag = Math.max(maxLag, pub.acked - r.lastSeq);
      return s;
    };
    await takeSample(0);
    for (let k = 1; k * o.sampleSeconds <= o.seconds; k++) {
      await sleep(Math.max(0, started + k * o.sampleSeconds * 1000 - performance.now()));
      if (publishError) throw new Error(`publisher failed: ${publishError}`);
      if (childExit) throw new Error(`gateway exited (${childExit})`);
      const t = (performance.now() - started) / 1000;
      const s = await takeSample(k * o.sampleSeconds);
      const endOfWindow = (k * o.sampleSeconds) % windowSec === 0 ||
        (k + 1) * o.sampleSeconds > o.seconds;
      if (endOfWindow) {
        const secs = t - wStart.t;
        const rates = readers.map((r, i) => (r.received - wStart.recv[i]) / secs);
        const inWindow = samples.slice(wStart.firstSample + 1);
        const w: Window = {
          from: Math.round(wStart.t),
          to: Math.round(t),
          publishRate: (pub.acked - wStart.acked) / secs,
          minReaderRate: rates.length ? Math.min(...rates) : 0,
          avgReaderRate: rates.length ? rates.reduce((a, b) => a + b, 0) / rates.length : 0,
          deliveriesPerSec: rates.reduce((a, b) => a + b, 0),
          rssEnd: s.rssBytes,
          rssMax: Math.max(...inWindow.map((x) => x.rssBytes)),
          evictions: s.evictions - (wStart.evictions - evictions0),
          stalledReconnects: stalledCounts.reconnects - wStart.reconnects,
        };
        windows.push(w);
        log(
          `t=${w.to}s pub ${w.publishRate.toFixed(1)}/s; per reader min ${
            w.minReaderRate.toFixed(1)
          } avg ${w.avgReaderRate.toFixed(1)}/s; RSS ${(w.rssEnd / MiB).toFixed(1)} MiB; ` +
            `evictions ${w.evictions}; queued ${(s.queuedBytes / 1024).toFixed(0)} KiB; ` +
            `connections ${s.connections}`,
        );
        wStart = {
          t,
          acked: pub.acked,
          recv: readers.map((r) => r.received),
          evictions: s.evictions + evictions0,
          reconnects: stalledCounts.reconnects,
          firstSample: samples.length - 1,
        };
      }
    }
    publishing = false;
    await pubLoop;
    const runSecs = (performance.now() - started) / 1000;
    const mEnd = await metrics(httpPort);
    const evictions = (mEnd.get("mqtt_slow_consumer_evictions_total") ?? 0) - evictions0;
    stalling = false;

    // --- drain: every reader gets every acknowledged message ------------------------------------
    const t0 = performance.now();
    for (let i = 0; i < 20 && pub.acked < pub.published; i++) await sleep(100);
    while (
      performance.now() - t0 < DRAIN_MS && readers.some((r) => !r.closed && r.lastSeq < pub.acked)
    ) await sleep(100);
    const drainMs = performance.now() - t0;
    const readersIncomplete = readers.filter((r) => r.lastSeq < pub.acked).length;
    const readersClosed = readers.filter((r) => r.closed).length;

    // --- verdicts -----------------------------------------------------------------------------
    const half = samples.filter((s) => s.t >= o.seconds / 2);
    const ys = half.map((s) => s.rssBytes);
    const mean = ys.reduce((a, b) => a + b, 0) / Math.max(1, ys.length);
    const slopePerSec = slope(half.map((s) => s.t), ys);
    const halfSecs = half.length > 1 ? half[half.length - 1].t - half[0].t : 0;
    const growthFraction = mean > 0 ? (slopePerSec * halfSecs) / mean : 0;
    const spreadFraction = mean > 0 ? (Math.max(...ys) - Math.min(...ys)) / mean : 0;
    const rssFlat = half.length >= 2 && growthFraction < 0.05 && spreadFraction < 0.10;
    const wholeRates = readers.map((r) => r.received / runSecs);
    const readersKeptUp = readersIncomplete === 0 && readersClosed === 0 &&
      windows.every((w) => w.minReaderRate >= 0.9 * w.publishRate) &&
      pub.acked >= 0.95 * o.rate * o.seconds;
    if (behindPublisher > 0) {
      log(`publisher held back by 60 unacknowledged on ${behindPublisher} ticks`);
    }
    return {
      options: {
        subscribers: o.subscribers,
        stalled: o.stalled,
        seconds: o.seconds,
        rate: o.rate,
        payload: o.payload,
        capKiB: o.capKiB,
        timeoutMs: o.timeoutMs,
        sampleSeconds: o.sampleSeconds,
      },
      samples,
      windows,
      secondHalf: {
        mean,
        min: Math.min(...ys),
        max: Math.max(...ys),
        slopePerMin: slopePerSec * 60,
        growthFraction,
        spreadFraction,
      },
      rssFlat,
      published: pub.published,
      acked: pub.acked,
      minReaderRate: wholeRates.length ? Math.min(...wholeRates) : 0,
      avgReaderRate: wholeRates.length
        ? wholeRates.reduce((a, b) => a + b, 0) / wholeRates.length
        : 0,
      publishRate: pub.acked / runSecs,
      maxLag,
      readersIncomplete,
      readersClosed,
      readersKeptUp,
      evictions,
      stalledReconnects: stalledCounts.reconnects,
      drainMs,
      pass: rssFlat && readersKeptUp,
    };
  } finally {
    stalling = false;
    publisher?.close();
    for (const r of readers) r.close();
    await Promise.all(slots);
    await Promise.all(readers.map((r) => r.done));
    await publisher?.done;
    try {
      child.kill("SIGTERM");
    } catch { /* gone */ }
    await childStatus;
    for (const e of Deno.readDirSync(`${root}data`)) {
      if (e.name.startsWith(dbPrefix)) {
        await Deno.remove(`${root}data/${e.name}`, { recursive: true }).catch(() => {});
      }
    }
  }
}

/** The report as Markdown. */
export function report(r: SoakResult): string {
  const mib = (n: number) => (n / MiB).toFixed(1);
  const o = r.options;
  const lines = [
    `Stalled-subscriber soak: ${o.subscribers} subscribers (${o.stalled} stalled), ${o.seconds} s, ` +
    `${o.rate} msg/s QoS 1, ${o.payload} B payload; per-client cap ${o.capKiB} KiB, ` +
    `slow_consumer_timeout_ms ${o.timeoutMs}; RSS sampled every ${o.sampleSeconds} s`,
    "",
    "| window s  | pub/s | reader min/s | reader avg/s | deliveries/s | evictions | reconnects | RSS end MiB | RSS max MiB |",
    "| --------- | ----- | ------------ | ------------ | ------------ | --------- | ---------- | ----------- | ----------- |",
    ...r.windows.map((w) =>
      `| ${`${w.from}-${w.to}`.padEnd(9)} | ${w.publishRate.toFixed(1).padStart(5)} | ${
        w.minReaderRate.toFixed(1).padStart(12)
      } | ${w.avgReaderRate.toFixed(1).padStart(12)} | ${
        w.deliveriesPerSec.toFixed(0).padStart(12)
      } | ${String(w.evictions).padStart(9)} | ${String(w.stalledReconnects).padStart(10)} | ${
        mib(w.rssEnd).padStart(11)
      } | ${mib(w.rssMax).padStart(11)} |`
    ),
    "",
    `RSS samples (MiB): ${r.samples.map((s) => mib(s.rssBytes)).join(" ")}`,
    `Second half: mean ${mib(r.secondHalf.mean)} MiB, min ${mib(r.secondHalf.min)}, max ${
      mib(r.secondHalf.max)
    }, linear-fit slope ${(r.secondHalf.slopePerMin / MiB).toFixed(2)} MiB/min → growth ${
      (r.secondHalf.growthFraction * 100).toFixed(1)
    }% of mean (need < 5%), spread ${
      (r.secondHalf.spreadFraction * 100).toFixed(1)
    }% (need < 10%)  ${r.rssFlat ? "FLAT" : "NOT FLAT"}`,
    `Readers: whole run per reader min ${r.minReaderRate.toFixed(2)} avg ${
      r.avgReaderRate.toFixed(2)
    } msg/s vs publish ${r.publishRate.toFixed(2)} msg/s; max lag ${r.maxLag} msgs; ` +
    `after ${(r.drainMs / 1000).toFixed(1)} s drain ${r.readersIncomplete} incomplete, ` +
    `${r.readersClosed} disconnected  ${r.readersKeptUp ? "KEPT UP" : "FELL BEHIND"}`,
    `Published ${r.published}, acked ${r.acked}; evictions ${r.evictions} (gateway metric), ` +
    `stalled reconnects ${r.stalledReconnects}`,
    r.pass ? "PASS" : "FAIL",
  ];
  return lines.join("\n");
}

if (import.meta.main) {
  const { values } = parseArgs({
    // `deno task soak -- --seconds 600` passes the "--" through.
    args: Deno.args[0] === "--" ? Deno.args.slice(1) : Deno.args,
    options: {
      subscribers: { type: "string" },
      stalled: { type: "string" },
      seconds: { type: "string" },
      rate: { type: "string" },
      payload: { type: "string" },
      "cap-kib": { type: "string" },
      "timeout-ms": { type: "string" },
      "sample-seconds": { type: "string" },
      json: { type: "string" },
    },
  });
  const num = (v: string | undefined, d: number) => v === undefined ? d : Number(v);
  const o: SoakOptions = {
    subscribers: num(values.subscribers, DEFAULTS.subscribers),
    stalled: num(values.stalled, DEFAULTS.stalled),
    seconds: num(values.seconds, DEFAULTS.seconds),
    rate: num(values.rate, DEFAULTS.rate),
    payload: num(values.payload, DEFAULTS.payload),
    capKiB: num(values["cap-kib"], DEFAULTS.capKiB),
    timeoutMs: num(values["timeout-ms"], DEFAULTS.timeoutMs),
    sampleSeconds: num(values["sample-seconds"], DEFAULTS.sampleSeconds),
    log: (l) => console.error(l),
  };
  const r = await runSoak(o);
  console.log(report(r));
  if (values.json) await Deno.writeTextFile(values.json, JSON.stringify(r, null, 2));
  Deno.exit(r.pass ? 0 : 1);
}

/**
 * The benchmark load generator: one scenario per process, loopback only, bounded in time and
 * count, printing one JSON line of figures. `run.ts` starts it pinned to a different core than
 * the server under test.
 *
 *   deno run -A tests/bench/loadgen.ts --scenario=qos1 --port=1883 --server-pid=123 \
 *     --warmup-ms=2000 --duration-ms=10000 [--conns=10 --inflight=20 --subs=100 ...]
 *
 * Scenarios: qos0 (ingest, --conns publishers), qos1 (ingest, --conns × --inflight), fanout
 * (1 publisher → --subs subscribers, window-bounded), e2e (1:1 at --rate msg/s), idle
 * (--count idle connections: RSS per connection and connects/s), stored_sessions (--count
 * clean-session-0 clients each subscribe to one keyed topic and disconnect: RSS per offline
 * stored session).
 *
 * The ingest scenarios run over raw libc sockets in one synchronous epoll loop
 * (`_raw_load.ts`, `_raw_socket.ts`): a Deno socket costs an op, a promise and a wake per
 * read, which made this process, not Mosquitto, the limit on QoS 1. `--coalesce-us` (default
 * 100) is how long QoS 1 lets PUBACKs gather after a wake before it reads again.
 *
 * @module
 */
import { parseArgs } from "node:util";
import {
  connectMqtt,
  DISCONNECT,
  encodePublish,
  encodeSubscribe,
  publishPayloadAt,
  repeat,
} from "./_mqtt.ts";
import { writeAll } from "./_mqtt.ts";
import { Link, openMany } from "./_link.ts";
import { type IngestOptions, qos0Raw, qos1Raw } from "./_raw_load.ts";
import { cpuPercent, cpuTicks, Histogram, rssBytes } from "./_stats.ts";

const { values: a } = parseArgs({
  args: Deno.args,
  options: {
    scenario: { type: "string" },
    port: { type: "string" },
    "server-pid": { type: "string" },
    "warmup-ms": { type: "string", default: "2000" },
    "duration-ms": { type: "string", default: "10000" },
    conns: { type: "string", default: "1" },
    inflight: { type: "string", default: "20" },
    subs: { type: "string", default: "100" },
    window: { type: "string", default: "1000" },
    rate: { type: "string", default: "1000" },
    count: { type: "string", default: "10000" },
    "settle-ms": { type: "string", default: "40000" },
    "max-msgs": { type: "string", default: "50000000" },
    "payload-bytes": { type: "string", default: "100" },
    "coalesce-us": { type: "string", default: "100" },
  },
});
const PORT = Number(a.port);
const SERVER_PID = Number(a["server-pid"]);
const WARMUP = Number(a["warmup-ms"]);
const DURATION = Number(a["duration-ms"]);
const MAX_MSGS = Number(a["max-msgs"]);
const PAYLOAD = new Uint8Array(Number(a["payload-bytes"])).fill(0x61);

// Bound in time: whatever happens, this process ends.
const hardStop = setTimeout(() => {
  console.error(`loadgen: scenario "${a.scenario}" exceeded its time bound`);
  Deno.exit(3);
}, WARMUP + DURATION + 2 * Number(a["settle-ms"]) + 60_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Server and own CPU over the measured window. */
function cpuWindow() {
  const t0 = performance.now();
  const s0 = cpuTicks(SERVER_PID);
  const l0 = cpuTicks("self");
  return () => {
    const ms = performance.now() - t0;
    return {
      serverCpuPct: cpuPercent(cpuTicks(SERVER_PID) - s0, ms),
      loadgenCpuPct: cpuPercent(cpuTicks("self") - l0, ms),
    };
  };
}

const scratch = new Uint8Array(8);
const scratchF64 = new Float64Array(scratch.buffer);

/**
 * Subscribers that record latency from the send time carried in each payload. `missing` counts
 * sequence numbers never received; `reordered` counts arrivals below the highest seen (the
 * gateway delivers an unkeyed MQTT topic from several log partitions, so order across
 * partitions is not kept).
 */
function attachSubscriber(l: Link, hist: Histogram, state: { measuring: boolean }) {
  const s = {
    lastSeq: -1,
    firstSeq: -1,
    received: 0,
    deliveries: 0,
    reordered: 0,
    get missing() {
      return this.lastSeq < 0 ? 0 : Math.max(0, this.lastSeq - this.firstSeq + 1 - this.received);
    },
  };
  l.onPublish = (first, buf, body) => {
    const p = publishPayloadAt(first, buf, body);
    const seq = ((buf[p] << 24) | (buf[p + 1] << 16) | (buf[p + 2] << 8) | buf[p + 3]) >>> 0;
    for (let i = 0; i < 8; i++) scratch[i] = buf[p + 4 + i];
    if (s.firstSeq < 0) s.firstSeq = seq;
    s.received++;
    if (seq < s.lastSeq) s.reordered++;
    else s.lastSeq = seq;
    if (state.measuring) {
      s.deliveries++;
      hist.recordMs(performance.now() - scratchF64[0]);
    }
  };
  return s;
}

/** Stamps `n` packets of a pre-encoded batch with consecutive sequence numbers and `now`. */
function stamp(out: Uint8Array, len: number, at: number, n: number, seq: number, now: number) {
  scratchF64[0] = now;
  for (let k = 0; k < n; k++, seq++) {
    const p = k * len + at;
    out[p] = seq >>> 24;
    out[p + 1] = (seq >>> 16) & 0xff;
    out[p + 2] = (seq >>> 8) & 0xff;
    out[p + 3] = seq & 0xff;
    out.set(scratch, p + 4);
  }
}

/** Fan-out: one QoS 0 publisher at max rate bounded by a window of undelivered messages. */
async function fanout(subsN: number, window: number) {
  const topic = "bench/fan";
  const hist = new Histogram();
  const state = { measuring: false };
  const pub = await Link.open(PORT, "bench-fan-pub");
  await pub.prime(topic);
  const links = await openMany(PORT, subsN, "bench-fan-sub", 50);
  const subs = links.map((l) => attachSubscriber(l, hist, state));
  await Promise.all(links.map((l) => l.subscribe(topic, 0)));
  let waiter: null | (() => void) = null;
  links.forEach((l) => l.afterChunk = () => waiter?.());
  const tpl = encodePublish(topic, PAYLOAD, 0);
  const len = tpl.bytes.length;
  const B = Math.min(50, window);
  const out = repeat(tpl.bytes, B);
  let seq = 0;
  let stopped = false;
  const minSeen = () => subs.reduce((m, s) => Math.min(m, s.lastSeq), Infinity);
  const loop = (async () => {
    while (!stopped && seq < MAX_MSGS) {
      if (seq - 1 - minSeen() + B > window) {
        await new Promise<void>((r) => {
          const t = setTimeout(() => (waiter = null, r()), 20); // a dropped copy must not stall
          waiter = () => (clearTimeout(t), waiter = null, r());
        });
        continue;
      }
      stamp(out, len, tpl.payloadAt, B, seq, performance.now());
      seq += B;
      await writeAll(pub.conn, out);
    }
  })();
  await sleep(WARMUP);
  state.measuring = true;
  const t0 = performance.now();
  const sent0 = seq;
  const cpu = cpuWindow();
  await sleep(DURATION);
  state.measuring = false;
  const ms = performance.now() - t0;
  const c = cpu();
  const published = seq - sent0;
  stopped = true;
  await loop;
  const deliveries = subs.reduce((n, s) => n + s.deliveries, 0);
  const missing = subs.reduce((n, s) => n + s.missing, 0);
  const reordered = subs.reduce((n, s) => n + s.reordered, 0);
  [pub, ...links].forEach((l) => l.close());
  return {
    published,
    deliveries,
    missing,
    reordered,
    elapsedMs: ms,
    deliveriesPerSec: deliveries / (ms / 1000),
    latency: hist.summary(),
    ...c,
  };
}

/** 1:1 at a fixed rate: end-to-end latency from the send time carried in the payload. */
async function e2e(rate: number) {
  const topic = "bench/e2e";
  const hist = new Histogram();
  const state = { measuring: false };
  const pub = await Link.open(PORT, "bench-e2e-pub");
  await pub.prime(topic);
  const sub = await Link.open(PORT, "bench-e2e-sub");
  const s = attachSubscriber(sub, hist, state);
  await sub.subscribe(topic, 0);
  const tpl = encodePublish(topic, PAYLOAD, 0);
  const len = tpl.bytes.length;
  const out = repeat(tpl.bytes, 64);
  let stopped = false;
  const start = performance.now();
  let sent = 0;
  const loop = (async () => {
    while (!stopped) {
      const now = performance.now();
      const n = Math.min(64, Math.floor((now - start) * rate / 1000) - sent);
      if (n > 0) {
        stamp(out, len, tpl.payloadAt, n, sent, now);
        sent += n;
        await writeAll(pub.conn, out.subarray(0, n * len));
      }
      await sleep(1);
    }
  })();
  await sleep(WARMUP);
  state.measuring = true;
  const t0 = performance.now();
  const sent0 = sent;
  const cpu = cpuWindow();
  await sleep(DURATION);
  state.measuring = false;
  const ms = performance.now() - t0;
  const c = cpu();
  stopped = true;
  await loop;
  pub.close();
  sub.close();
  return {
    published: sent - sent0,
    deliveries: s.deliveries,
    missing: s.missing,
    reordered: s.reordered,
    elapsedMs: ms,
    latency: hist.summary(),
    ...c,
  };
}

/** Idle connections: server RSS before/after and connects/s (no read loop on our side). */
async function idle(count: number) {
  const rss0 = rssBytes(SERVER_PID);
  const conns: Deno.TcpConn[] = new Array(count);
  let next = 0;
  const t0 = performance.now();
  const cpu = cpuWindow();
  await Promise.all(Array.from({ length: Math.min(200, count) }, async () => {
    while (next < count) {
      const i = next++;
      conns[i] = await connectMqtt(PORT, `bench-idle-${i}`, 600);
    }
  }));
  const ms = performance.now() - t0;
  const c = cpu();
  await sleep(Math.min(2000, WARMUP + 500));
  const rss1 = rssBytes(SERVER_PID);
  for (const conn of conns) {
    writeAll(conn, DISCONNECT).catch(() => {}).finally(() => conn.close());
  }
  await sleep(100);
  return {
    connections: count,
    elapsedMs: ms,
    connectsPerSec: count / (ms / 1000),
    rssBefore: rss0,
    rssAfter: rss1,
    rssPerConnBytes: (rss1 - rss0) / count,
    ...c,
  };
}

/** Reads from `conn` until a SUBACK arrived (the CONNACK was read by connectMqtt). */
async function readSuback(conn: Deno.TcpConn): Promise<void> {
  const b = new Uint8Array(64);
  let got = 0;
  while (got < 5) {
    const n = await conn.read(b.subarray(got));
    if (n === null) throw new Error("Connection closed before SUBACK");
    got += n;
  }
  if (b[0] !== 0x90 || b[4] === 0x80) throw new Error(`SUBACK refused: ${[...b.subarray(0, 5)]}`);
}

/**
 * `count` clients connect (clean session `clean`), each subscribes to one keyed topic
 * (`sensors/<prefix>-<i>/data`: one partition) and disconnects, 100 at a time. Resolves with
 * the elapsed time.
 */
async function connectSubscribeLeave(count: number, prefix: string, clean: boolean) {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: Math.min(100, count) }, async () => {
    while (next < count) {
      const i = next++;
      const conn = await connectMqtt(PORT, `bench-${prefix}-${i}`, 600, clean);
      await writeAll(conn, encodeSubscribe(1, `sensors/${prefix}-${i}/data`, 1));
      await readSuback(conn);
      await writeAll(conn, DISCONNECT).catch(() => {});
      conn.close();
    }
  }));
  return performance.now() - t0;
}

/**
 * The server's RSS once it has settled after a burst: sampled every 500 ms for at most
 * `maxMs`; it ends early once RSS fell ≥ 15% below its first sample and held within 1% for
 * 3 s. A garbage-collected server returns the young generation a burst grew only when V8's
 * memory reducer runs, 5–30 s after the burst (measured); before that RSS says how big the
 * burst's garbage was, not what the sessions hold.
 */
async function settledRss(maxMs: number): Promise<number> {
  const t0 = performance.now();
  const first = rssBytes(SERVER_PID);
  const recent: number[] = [];
  let rss = first;
  while (performance.now() - t0 < maxMs) {
    await sleep(500);
    rss = rssBytes(SERVER_PID);
    recent.push(rss);
    if (recent.length > 6) recent.shift();
    const flat = recent.length === 6 && Math.max(...recent) <= Math.min(...recent) * 1.01;
    if (flat && rss <= first * 0.85) break;
  }
  return rss;
}

/**
 * Offline stored sessions: what `count` clean-session-0 clients, each subscribed to one keyed
 * topic and disconnected, leave in the server's RSS. First the same burst with clean sessions
 * (nothing is kept), so the figure does not bill the sessions for what any burst of connections
 * leaves once (code paths first run, the allocator's and the young generation's growth); then
 * RSS settled (`settledRss`), the stored-session burst, RSS settled again. `rssPerSessionBytes`
 * is the settled difference per session; `unsettledRssPerSessionBytes` the difference 2 s after
 * the burst (the former figure, burst garbage included); `warmupRssPerConnBytes` what the
 * clean burst left, settled, from the start.
 */
async function storedSessions(count: number, settleMs: number) {
  const rssStart = rssBytes(SERVER_PID);
  await connectSubscribeLeave(count, "warm", true);
  const rss0 = await settledRss(settleMs);
  const cpu = cpuWindow();
  const ms = await connectSubscribeLeave(count, "stored", false);
  const c = cpu();
  await sleep(Math.min(2000, WARMUP + 500));
  const rssUnsettled = rssBytes(SERVER_PID);
  const rss1 = await settledRss(settleMs);
  return {
    sessions: count,
    elapsedMs: ms,
    sessionsPerSec: count / (ms / 1000),
    rssBefore: rss0,
    rssAfter: rss1,
    rssPerSessionBytes: (rss1 - rss0) / count,
    unsettledRssPerSessionBytes: (rssUnsettled - rss0) / count,
    warmupRssPerConnBytes: (rss0 - rssStart) / count,
    ...c,
  };
}

/** The ingest scenarios' options from the command line. */
function ingest(): IngestOptions {
  return {
    port: PORT,
    conns: Number(a.conns),
    warmupMs: WARMUP,
    durationMs: DURATION,
    maxMsgs: MAX_MSGS,
    payload: PAYLOAD,
    cpuWindow,
  };
}

async function main(): Promise<unknown> {
  switch (a.scenario) {
    case "qos0":
      return qos0Raw(ingest());
    case "qos1":
      return qos1Raw({
        ...ingest(),
        inflight: Number(a.inflight),
        coalesceUs: Number(a["coalesce-us"]),
      });
    case "fanout":
      return await fanout(Number(a.subs), Number(a.window));
    case "e2e":
      return await e2e(Number(a.rate));
    case "idle":
      return await idle(Number(a.count));
    case "stored_sessions":
      return await storedSessions(Number(a.count), Number(a["settle-ms"]));
  }
  throw new Error(`Unknown scenario "${a.scenario}"`);
}

try {
  const r = await main();
  console.log(JSON.stringify({ scenario: a.scenario, ...(r as object) }));
  clearTimeout(hardStop);
  Deno.exit(0);
} catch (err) {
  console.error(`loadgen: scenario "${a.scenario}" failed: ${(err as Error)?.stack ?? err}`);
  Deno.exit(1);
}

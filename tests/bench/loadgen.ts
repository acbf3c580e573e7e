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
 * (--count idle connections: RSS per connection and connects/s), fleet (--count devices, one
 * --qos reading every --interval-ms each, one subscriber: CPU, RSS, PUBACK and delivery
 * latency; `_raw_fleet.ts`), stored_sessions (--count
 * clean-session-0 clients each subscribe to one keyed topic and disconnect: RSS per offline
 * stored session).
 *
 * The ingest scenarios (`_raw_load.ts`) and the delivery scenarios, fan-out and 1:1
 * (`_raw_delivery.ts`), run over raw libc sockets in one synchronous epoll loop
 * (`_raw_socket.ts`): a Deno socket costs an op, a promise and a wake per read, which made
 * this process, not Mosquitto, the limit on QoS 1 and on fan-out (Mosquitto writes every
 * PUBACK and every delivery on its own). `--coalesce-us` (default 100) is how long QoS 1 lets
 * PUBACKs gather after a wake that found work before it reads again; fan-out adapts that wait
 * between `--coalesce-us` and `--max-coalesce-us` (default 10000) to fill its reads; 1:1 never
 * waits beyond the next send time. The idle scenario's connect burst runs in such a loop too
 * (`_raw_idle.ts`, 200 connects in flight); stored sessions use Deno sockets.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { connectMqtt, DISCONNECT, encodeSubscribe, writeAll } from "./_mqtt.ts";
import { type DeliveryOptions, e2eRaw, fanoutRaw } from "./_raw_delivery.ts";
import { IdleBurst } from "./_raw_idle.ts";
import { fleetRaw } from "./_raw_fleet.ts";
import { type IngestOptions, qos0Raw, qos1Raw } from "./_raw_load.ts";
import { cpuPercent, cpuTicks, rssBytes } from "./_stats.ts";

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
    "interval-ms": { type: "string", default: "10000" },
    qos: { type: "string", default: "1" },
    "coalesce-us": { type: "string", default: "100" },
    "max-coalesce-us": { type: "string", default: "10000" },
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

/**
 * Idle connections (`_raw_idle.ts`): server RSS before and 2 s after the last CONNACK, and
 * connects/s; no read loop on our side once connected.
 */
async function idle(count: number) {
  const rss0 = rssBytes(SERVER_PID);
  const burst = new IdleBurst({ port: PORT, count, inFlight: 200, cpuWindow });
  try {
    const { elapsedMs: ms, cpu: c } = burst.run();
    await sleep(Math.min(2000, WARMUP + 500));
    const rss1 = rssBytes(SERVER_PID);
    return {
      connections: count,
      elapsedMs: ms,
      connectsPerSec: count / (ms / 1000),
      rssBefore: rss0,
      rssAfter: rss1,
      rssPerConnBytes: (rss1 - rss0) / count,
      io: "libc-epoll",
      ...c,
    };
  } finally {
    burst.close();
    await sleep(100);
  }
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

/** The delivery scenarios' options from the command line. */
function delivery(): DeliveryOptions {
  return {
    port: PORT,
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
      return fanoutRaw({
        ...delivery(),
        subs: Number(a.subs),
        window: Number(a.window),
        coalesceUs: Number(a["coalesce-us"]),
        maxCoalesceUs: Number(a["max-coalesce-us"]),
      });
    case "e2e":
      return e2eRaw({ ...delivery(), rate: Number(a.rate) });
    case "idle":
      return await idle(Number(a.count));
    case "fleet":
      return fleetRaw({
        port: PORT,
        serverPid: SERVER_PID,
        count: Number(a.count),
        intervalMs: Number(a["interval-ms"]),
        qos: Number(a.qos) === 1 ? 1 : 0,
        warmupMs: WARMUP,
        durationMs: DURATION,
        payload: PAYLOAD,
        cpuWindow,
      });
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

/**
 * Soak: one stuck subscriber among 100 (issue 3 acceptance). Not part of the test suite.
 *
 *   deno run -A tests/e2e/stuck_subscriber_soak.ts [--seconds 60] [--rate 200] [--payload 200]
 *
 * Starts the gateway as its own process (`main.ts run`, embedded backend, temp store) with
 * explicit caps, connects 99 subscribers that read and PUBACK everything, and runs a steady
 * QoS 1 publisher in two phases of `--seconds` each:
 *   A. the 99 alone;
 *   B. the 99 plus one subscriber that connects, subscribes and never reads its socket again
 *      (reconnected each time the gateway evicts it, so the pressure lasts the whole phase).
 * It reports the delivery rate to the 99 in each phase (B must stay ≥ 90% of A) and the
 * gateway process's peak RSS in B against a fixed baseline — its peak RSS under the same
 * load without the stuck one (A) — plus the bound the outbound caps put on queued bytes,
 * min(max_outbound_queue_bytes, clients × hard cap).
 *
 * @module
 */
import { parseArgs } from "node:util";
import { connectPacket, publishPacket, waitFor } from "../helpers/gateway.ts";
import { FastSubscriber, stuckSubscriber } from "./_subscribe_helpers.ts";

const args = parseArgs({
  args: Deno.args,
  options: {
    seconds: { type: "string", default: "60" },
    rate: { type: "string", default: "200" },
    payload: { type: "string", default: "200" },
  },
});
const SECONDS = Number(args.values.seconds);
const RATE = Number(args.values.rate);
const PAYLOAD = "p".repeat(Number(args.values.payload));
const TOPIC = "building/north/room/42/temp";
const SUBSCRIBERS = 99;
const CAP = 256 * 1024; // max_outbound_queue_bytes_per_client (hard cap: twice this)
const GLOBAL = 64 * 1024 * 1024; // max_outbound_queue_bytes
const TIMEOUT_MS = 2000; // slow_consumer_timeout_ms
const WARMUP_MS = 2000;

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

async function metric(httpPort: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
  let sum = 0;
  for (const line of text.split("\n")) {
    const m = /^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (m && m[1] === name) sum += Number(m[3]);
  }
  return sum;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

const MiB = (n: number) => (n / 1048576).toFixed(1);

// --- gateway process ---------------------------------------------------------------------
const dir = await Deno.makeTempDir({ prefix: "iggy-mqtt-soak-" });
const mqttPort = freePort();
const httpPort = freePort();
const root = new URL("../../", import.meta.url).pathname;
const child = new Deno.Command(Deno.execPath(), {
  args: ["run", "-A", "main.ts", "run", "--config", "config/gateway.toml"],
  cwd: root,
  env: {
    IGGY_MQTT_LISTENERS_TCP: `127.0.0.1:${mqttPort}`,
    IGGY_MQTT_LISTENERS_HTTP: `127.0.0.1:${httpPort}`,
    IGGY_MQTT_LISTENERS_WS: "", // the quick start config binds 8083
    IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "true",
    IGGY_MQTT_LOG_AUTO_CREATE: "true",
    IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db`,
    IGGY_MQTT_GATEWAY_LOG_LEVEL: "warn",
    IGGY_MQTT_LIMITS_MAX_OUTBOUND_QUEUE_BYTES_PER_CLIENT: String(CAP),
    IGGY_MQTT_LIMITS_MAX_OUTBOUND_QUEUE_BYTES: String(GLOBAL),
    IGGY_MQTT_LIMITS_SLOW_CONSUMER_TIMEOUT_MS: String(TIMEOUT_MS),
  },
  stdout: Deno.env.get("SOAK_LOG") ? "inherit" : "null",
  stderr: "inherit",
}).spawn();

try {
  await waitFor(
    async () => {
      try {
        const r = await fetch(`http://127.0.0.1:${httpPort}/ready`);
        await r.body?.cancel();
        return r.status === 200;
      } catch {
        return false; // not listening yet
      }
    },
    30_000,
    "the gateway to become ready",
  );
  const idleRss = rssOf(child.pid);

  const good = await Promise.all(
    Array.from(
      { length: SUBSCRIBERS },
      (_, i) => FastSubscriber.start(mqttPort, `good-${i}`, TOPIC),
    ),
  );
  await sleep(500); // real time: the process settles before its baseline RSS is read
  const baselineRss = rssOf(child.pid);

  // --- steady QoS 1 publisher, pipelined: a batch every 10 ms, PUBACKs counted apart ------
  const pub = await Deno.connect({ hostname: "127.0.0.1", port: mqttPort });
  await pub.write(connectPacket("soak-pub"));
  let published = 0;
  let acked = 0;
  (async () => {
    const buf = new Uint8Array(65536);
    for (;;) {
      const n = await pub.read(buf).catch(() => null);
      if (n === null) return;
      for (let i = 0; i < n; i++) if (buf[i] === 0x40) acked++; // approximate; report only
    }
  })();
  let publishing = true;
  let id = 1;
  const publisher = (async () => {
    const started = performance.now();
    for (let tick = 1; publishing; tick++) {
      const due = Math.floor((performance.now() - started) * RATE / 1000) - published;
      if (due > 0) {
        const parts: Uint8Array[] = [];
        for (let i = 0; i < due; i++) {
          parts.push(publishPacket(TOPIC, PAYLOAD, 1, id));
          id = id === 65535 ? 1 : id + 1;
        }
        const all = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
        let at = 0;
        for (const p of parts) {
          all.set(p, at);
          at += p.length;
        }
        let off = 0;
        while (off < all.length) off += await pub.write(all.subarray(off));
        published += due;
      }
      await sleep(Math.max(0, started + tick * 10 - performance.now()));
    }
  })();

  interface Phase {
    name: string;
    ratePerSub: number;
    minRatePerSub: number;
    publishRate: number;
    peakRss: number;
    peakQueued: number;
    evictions: number;
  }

  const phase = async (name: string, stuck: boolean): Promise<Phase> => {
    let stuckConn: Deno.TcpConn | null = null;
    let stuckSerial = 0;
    const evictionsBefore = await metric(httpPort, "mqtt_slow_consumer_evictions_total");
    let evictionsSeen = evictionsBefore;
    if (stuck) stuckConn = await stuckSubscriber(mqttPort, `stuck-${stuckSerial++}`, TOPIC);
    await sleep(WARMUP_MS);
    const t0 = performance.now();
    const r0 = good.map((g) => g.received);
    const p0 = published;
    let peakRss = 0;
    let peakQueued = 0;
    while (performance.now() - t0 < SECONDS * 1000) {
      await sleep(250); // sampling period of a phase measured in real time
      peakRss = Math.max(peakRss, rssOf(child.pid));
      peakQueued = Math.max(peakQueued, await metric(httpPort, "mqtt_outbound_queue_bytes"));
      if (stuck) {
        const ev = await metric(httpPort, "mqtt_slow_consumer_evictions_total");
        if (ev > evictionsSeen) {
          evictionsSeen = ev;
          try {
            stuckConn?.close();
          } catch { /* closed */ }
          stuckConn = await stuckSubscriber(mqttPort, `stuck-${stuckSerial++}`, TOPIC);
        }
      }
    }
    const secs = (performance.now() - t0) / 1000;
    const rates = good.map((g, i) => (g.received - r0[i]) / secs);
    try {
      stuckConn?.close();
    } catch { /* closed */ }
    return {
      name,
      ratePerSub: rates.reduce((a, b) => a + b, 0) / rates.length,
      minRatePerSub: Math.min(...rates),
      publishRate: (published - p0) / secs,
      peakRss,
      peakQueued,
      evictions: (await metric(httpPort, "mqtt_slow_consumer_evictions_total")) - evictionsBefore,
    };
  };

  const a = await phase("A: 99 subscribers", false);
  const b = await phase("B: 99 + 1 stuck", true);
  publishing = false;
  await publisher;

  const capsBound = Math.min(GLOBAL, (SUBSCRIBERS + 1) * 2 * CAP);
  const row = (p: Phase) =>
    `| ${p.name.padEnd(18)} | ${p.publishRate.toFixed(0).padStart(7)} | ${
      p.ratePerSub.toFixed(1).padStart(9)
    } | ${p.minRatePerSub.toFixed(1).padStart(9)} | ${
      ((p.ratePerSub * SUBSCRIBERS) | 0).toString().padStart(10)
    } | ${p.evictions.toString().padStart(9)} | ${MiB(p.peakQueued).padStart(10)} | ${
      MiB(p.peakRss).padStart(12)
    } |`;
  console.log(
    `\nStuck-subscriber soak: ${SECONDS} s per phase, ${RATE} msg/s QoS 1, ${PAYLOAD.length} B payload, ` +
      `${SUBSCRIBERS} good subscribers; caps: ${CAP / 1024} KiB per client (hard ${
        2 * CAP / 1024
      } KiB), ${MiB(GLOBAL)} MiB global, slow_consumer_timeout_ms ${TIMEOUT_MS}\n`,
  );
  console.log(
    "| phase              | pub/s   | msg/s/sub | min/sub   | deliv/s    | evictions | peak queue | peak RSS MiB |",
  );
  console.log(
    "| ------------------ | ------- | --------- | --------- | ---------- | --------- | ---------- | ------------ |",
  );
  console.log(row(a));
  console.log(row(b));
  const ratio = b.ratePerSub / a.ratePerSub;
  // The fixed baseline is the gateway's RSS under the same load without the stuck one (phase
  // A): what the stuck subscriber may add on top is bounded by the outbound caps.
  const rssLimit = a.peakRss + capsBound;
  console.log(
    `\ndelivery B/A: ${(ratio * 100).toFixed(1)}% (need >= 90%)  ${ratio >= 0.9 ? "PASS" : "FAIL"}`,
  );
  console.log(
    `RSS: idle ${MiB(idleRss)} MiB; 99 connected, no load ${MiB(baselineRss)} MiB; ` +
      `peak A ${MiB(a.peakRss)} MiB (baseline); peak B ${MiB(b.peakRss)} MiB; ` +
      `limit = baseline + caps bound ${MiB(capsBound)} MiB = ${MiB(rssLimit)} MiB  ${
        b.peakRss <= rssLimit ? "PASS" : "FAIL"
      }`,
  );
  console.log(`published ${published}, PUBACKs seen ~${acked}`);
  for (const g of good) g.close();
  pub.close();
} finally {
  child.kill("SIGTERM");
  await child.status;
  await Deno.remove(dir, { recursive: true }).catch(() => {});
}

/**
 * The aarch64 smoke's steps, in order. Each throws with the reason when it fails and returns a
 * one-line account of what it saw when it passes. The gateway and `read` run under emulation;
 * the MQTT clients run natively on the host.
 *
 * @module
 */
import { EmulatedGateway, type Emulator, runEmulated, until } from "./_emulated.ts";
import { mosquittoPub, MosquittoSub, Qos1Load } from "./_clients.ts";
import {
  duplicates,
  installCertificate,
  missing,
  readTopic,
  type SmokeFiles,
  TLS_FIXTURES,
  topicMap,
} from "./_store.ts";

/** What the steps share. */
export interface Smoke {
  readonly emu: Emulator;
  readonly files: SmokeFiles;
  readonly expectVersion: string | undefined;
  gateway: EmulatedGateway | null;
  readonly ports: { tcp: number; tls: number; http: number };
  /** The QoS 1 load that was running when the gateway was SIGKILLed. */
  killed: Qos1Load | null;
  /** Payloads published with mosquitto_pub: QoS 0, QoS 1, QoS 1 over TLS. */
  readonly live: { readonly q0: string; readonly q1: string; readonly tls: string };
  /** Run at the end, passed or not (subscribers, loads). */
  readonly cleanups: (() => void | Promise<void>)[];
}

/** One step: a name for the output, its own time bound, and the work. */
export interface Step {
  readonly name: string;
  readonly timeoutMs: number;
  run(s: Smoke): Promise<string>;
}

/** The steps of one smoke run. */
export const STEPS: readonly Step[] = [
  { name: "emulated deno is aarch64", timeoutMs: 60_000, run: checkVersion },
  { name: "start (run -P=gateway main.ts run), /ready", timeoutMs: 150_000, run: start },
  { name: "mosquitto_pub QoS 0, 1, TLS to mosquitto_sub", timeoutMs: 60_000, run: liveDelivery },
  { name: "read --json", timeoutMs: 90_000, run: readBack },
  { name: "kill -9 under QoS 1 load", timeoutMs: 90_000, run: killUnderLoad },
  { name: "restart: every PUBACKed message stored", timeoutMs: 180_000, run: recover },
  { name: "SIGHUP: topic map and TLS certificate", timeoutMs: 120_000, run: reload },
  { name: "SIGTERM drain under QoS 1 load", timeoutMs: 150_000, run: drain },
];

const RELOAD_REFUSED = "Reload refused; the previous map, users and certificates stay";

async function checkVersion(s: Smoke): Promise<string> {
  const r = await runEmulated(s.emu, ["--version"], 50_000);
  const first = r.stdout.split("\n")[0].trim();
  if (r.code !== 0 || !first.includes("aarch64-unknown-linux-gnu")) {
    throw new Error(`"deno --version" under ${s.emu.qemu} said: ${first || r.stderr.trim()}`);
  }
  if (s.expectVersion && !first.startsWith(`deno ${s.expectVersion} `)) {
    throw new Error(`expected deno ${s.expectVersion}, got: ${first}`);
  }
  return first;
}

async function start(s: Smoke): Promise<string> {
  const t0 = performance.now();
  const gw = new EmulatedGateway(s.emu, s.files.config);
  s.gateway = gw;
  const started = await gw.waitForLog("Gateway started", 120_000);
  s.ports.tcp = Number(started.tcp);
  s.ports.tls = Number(started.tls);
  s.ports.http = Number(started.http);
  const logged = seconds(t0);
  await until(
    async () => {
      if (gw.exited) throw new Error(`the gateway exited (${gw.exited.code}): ${gw.stderrTail}`);
      try {
        const res = await fetch(`http://127.0.0.1:${s.ports.http}/ready`, {
          signal: AbortSignal.timeout(10_000),
        });
        await res.body?.cancel();
        return res.status === 200;
      } catch {
        return false;
      }
    },
    60_000,
    "GET /ready to answer 200",
  );
  const { tcp, tls, http } = s.ports;
  return `"Gateway started" after ${logged} s, /ready 200 after ${seconds(t0)} s ` +
    `(mqtt ${tcp}, mqtt+tls ${tls}, http ${http})`;
}

async function liveDelivery(s: Smoke): Promise<string> {
  const { tcp, tls } = s.ports;
  const sends = [
    { name: "q0", qos: 0, port: tcp, payload: s.live.q0 },
    { name: "q1", qos: 1, port: tcp, payload: s.live.q1 },
    // Over TLS: rustls and its aarch64 crypto in the emulated runtime.
    { name: "tls", qos: 1, port: tls, payload: s.live.tls },
  ] as const;
  const sub = new MosquittoSub(tcp, "smoke-sub", sends.map((m) => `smoke/${m.name}`), 3, 50);
  s.cleanups.push(() => sub.kill());
  await sub.subscribed(30_000);
  for (const m of sends) {
    const cafile = m.port === tls ? `${TLS_FIXTURES}server.crt` : undefined;
    const topic = `smoke/${m.name}`;
    const p = await mosquittoPub(
      m.port,
      `smoke-pub-${m.name}`,
      topic,
      m.payload,
      m.qos,
      30_000,
      cafile,
    );
    if (p.code !== 0) throw new Error(`mosquitto_pub (${m.name}) exited ${p.code}: ${p.output}`);
    if (m.qos === 1 && !p.output.includes("received PUBACK")) {
      throw new Error(`mosquitto_pub (${m.name}) got no PUBACK: ${p.output}`);
    }
  }
  const { code, output } = await sub.done();
  const lines = output.split("\n").map((l) => l.trim());
  const got = sends.filter((m) => lines.includes(`smoke/${m.name} ${m.payload}`));
  if (code !== 0 || got.length !== sends.length) {
    throw new Error(`mosquitto_sub exited ${code} with ${got.length} of 3 messages: ${output}`);
  }
  // Delivered at the QoS it was published with (-d prints each PUBLISH's flags).
  for (const m of sends) {
    if (
      !new RegExp(`received PUBLISH \\(d0, q${m.qos}, r0, m\\d+, 'smoke/${m.name}'`).test(output)
    ) {
      throw new Error(`smoke/${m.name} was not delivered at QoS ${m.qos}: ${output}`);
    }
  }
  return "QoS 1 PUBACKed over TCP and TLS; mosquitto_sub got all three at their QoS";
}

async function readBack(s: Smoke): Promise<string> {
  const stored = await readTopic(s.emu, s.files, "before", 100, 80_000);
  const expected = [
    { name: "q0", qos: "0", payload: s.live.q0 },
    { name: "q1", qos: "1", payload: s.live.q1 },
    { name: "tls", qos: "1", payload: s.live.tls },
  ];
  for (const { name, qos, payload } of expected) {
    const m = stored.find((x) => x.payload === payload);
    if (!m) throw new Error(`read --json lacks "${payload}": ${JSON.stringify(stored)}`);
    const h = m.headers;
    const right = h["mqtt.topic"] === `smoke/${name}` && h["mqtt.qos"] === qos &&
      h["mqtt.client_id"] === `smoke-pub-${name}` &&
      (qos === "1") === (h["mqtt.packet_id"] !== undefined);
    if (!right) throw new Error(`wrong headers for "${payload}": ${JSON.stringify(h)}`);
  }
  return `${stored.length} messages, each with its mqtt.topic, mqtt.qos, mqtt.client_id ` +
    "(and mqtt.packet_id at QoS 1)";
}

async function killUnderLoad(s: Smoke): Promise<string> {
  const gw = s.gateway!;
  const load = await Qos1Load.start(s.ports.tcp, {
    clients: 4,
    window: 8,
    // One partition key each: the load spreads over the topic's partitions.
    topic: (i) => `smoke/kill${i}`,
    prefix: "kill",
  });
  s.cleanups.push(() => load.stop());
  s.killed = load;
  const t0 = performance.now();
  await until(() => load.acked.size >= 500, 60_000, "500 PUBACKs from the QoS 1 load");
  const rate = Math.round(load.acked.size / ((performance.now() - t0) / 1000));
  const atKill = { acked: load.acked.size, inflight: load.inflight };
  if (atKill.inflight === 0) throw new Error("no publish was in flight at the kill");
  gw.signal("SIGKILL");
  const status = await gw.status;
  await load.stop();
  s.gateway = null;
  if (status.signal !== "SIGKILL") {
    throw new Error(`expected death by SIGKILL, got code ${status.code} ${status.signal}`);
  }
  return `SIGKILL with ${atKill.acked} PUBACKed and ${atKill.inflight} in flight ` +
    `(~${rate} PUBACKs/s emulated; means nothing)`;
}

async function recover(s: Smoke): Promise<string> {
  const started = await start(s);
  const load = s.killed!;
  const stored = await readTopic(s.emu, s.files, "before", load.sent + 100, 120_000);
  const lost = missing([...load.acked, s.live.q1, s.live.tls], stored);
  if (lost.length > 0) {
    throw new Error(`${lost.length} PUBACKed messages missing after restart: ${lost.slice(0, 5)}`);
  }
  const ours = stored.filter((m) => m.payload.startsWith("kill-"));
  const partitions = new Set(ours.map((m) => m.partition)).size;
  return `${started}; sent ${load.sent}, PUBACKed ${load.acked.size}, stored ${ours.length} ` +
    `in ${partitions} partitions (${duplicates(ours)} duplicates), 0 PUBACKed lost`;
}

async function reload(s: Smoke): Promise<string> {
  const gw = s.gateway!;
  // Subscribed under the old map: the reload must move this subscription to the new target.
  const sub = new MosquittoSub(s.ports.tcp, "smoke-reload-sub", ["smoke/reload"], 1, 90);
  s.cleanups.push(() => sub.kill());
  await sub.subscribed(30_000);
  // What an operator does: edit the map, renew the certificate in place, kill -HUP.
  await Deno.writeTextFile(`${s.emu.root}${s.files.map}`, topicMap("after"));
  await installCertificate(s.emu.root, s.files, "server2");
  const from = gw.lines.length;
  gw.signal("SIGHUP");
  const reloaded = await Promise.race([
    gw.waitForLog("Configuration reloaded", 60_000, from),
    gw.waitForLog(RELOAD_REFUSED, 60_000, from)
      .then((l) => Promise.reject(new Error(`reload refused: ${JSON.stringify(l)}`))),
  ]);
  if (Number(reloaded.subscriptions_reresolved) !== 1 || reloaded.tls_reloaded !== true) {
    throw new Error(
      `expected 1 subscription re-resolved and TLS reloaded: ${JSON.stringify(reloaded)}`,
    );
  }
  const payload = `reload-${crypto.randomUUID()}`;
  const p = await mosquittoPub(s.ports.tcp, "smoke-pub-reload", "smoke/reload", payload, 1, 30_000);
  if (p.code !== 0 || !p.output.includes("received PUBACK")) {
    throw new Error(`mosquitto_pub -q 1 after the reload: exit ${p.code}: ${p.output}`);
  }
  const got = await sub.done();
  if (got.code !== 0 || !got.output.includes(`smoke/reload ${payload}`)) {
    throw new Error(`the subscription did not follow the reload: ${got.output}`);
  }
  const stored = await readTopic(s.emu, s.files, "after", 100, 80_000);
  if (!stored.some((m) => m.payload === payload)) {
    throw new Error(`"${payload}" is not in the new rule's topic "after"`);
  }
  // The TLS port now serves the renewed certificate, and only that one.
  const tlsPub = (ca: string) =>
    mosquittoPub(s.ports.tls, "smoke-pub-tls2", "smoke/tls", ca, 1, 30_000, `${TLS_FIXTURES}${ca}`);
  const renewed = await tlsPub("server2.crt");
  if (renewed.code !== 0 || !renewed.output.includes("received PUBACK")) {
    throw new Error(`TLS with the renewed certificate: exit ${renewed.code}: ${renewed.output}`);
  }
  if ((await tlsPub("server.crt")).code === 0) {
    throw new Error("the TLS port still serves the old certificate");
  }
  return "new publishes follow the new rule, the live subscription moved with them (1 " +
    "re-resolved), TLS serves the renewed certificate only";
}

async function drain(s: Smoke): Promise<string> {
  const gw = s.gateway!;
  const load = await Qos1Load.start(s.ports.tcp, {
    clients: 2,
    window: 8,
    topic: (i) => `smoke/drain${i}`,
    prefix: "drain",
  });
  s.cleanups.push(() => load.stop());
  await until(() => load.acked.size >= 50, 60_000, "50 PUBACKs from the QoS 1 load");
  const from = gw.lines.length;
  const t0 = performance.now();
  const atSignal = { acked: load.acked.size, inflight: load.inflight };
  gw.signal("SIGTERM");
  let timer: ReturnType<typeof setTimeout> | undefined;
  const status = await Promise.race([
    gw.status,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("the gateway did not exit within 90 s")), 90_000);
    }),
  ]).finally(() => clearTimeout(timer));
  const took = seconds(t0);
  await load.stop();
  s.gateway = null;
  const after = gw.lines.slice(from).map((l) => l.msg);
  if (status.code !== 0 || status.signal !== null) {
    throw new Error(`exit code ${status.code}, signal ${status.signal}: ${gw.stderrTail}`);
  }
  if (!after.includes("Stopping on signal") || !after.includes("Gateway stopped")) {
    throw new Error(`missing "Stopping on signal"/"Gateway stopped" in: ${after.join(", ")}`);
  }
  // A clean stop checkpoints the catalog: no -wal is left (OPERATIONS, offline backup).
  const wal = await Deno.stat(`${s.emu.root}${s.files.dir}/gateway.db-wal`)
    .then((i) => i.size, () => 0);
  if (wal > 0) throw new Error(`the catalog's -wal still holds ${wal} bytes after the stop`);
  const stored = await readTopic(s.emu, s.files, "after", load.sent + 100, 120_000);
  const lost = missing(load.acked, stored);
  if (lost.length > 0) {
    throw new Error(
      `${lost.length} PUBACKed messages missing after the drain: ${lost.slice(0, 5)}`,
    );
  }
  return `exit 0 ${took} s after SIGTERM with ${atSignal.inflight} in flight; PUBACKed ` +
    `${load.acked.size} (${load.acked.size - atSignal.acked} during the drain), all stored`;
}

/** Seconds since `since` (a performance.now() value), one decimal. */
export function seconds(since: number): string {
  return ((performance.now() - since) / 1000).toFixed(1);
}

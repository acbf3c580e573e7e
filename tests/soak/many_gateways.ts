/**
 * Many gateways, one broker, under churn: Debian's HAProxy (the configuration of
 * docs/OPERATIONS.md "Many gateways", `tests/fixtures/haproxy/gateways.cfg`, PROXY protocol v2 on)
 * in front of three gateways on one Iggy (a real one at `--iggy host:port`, else the fake Iggy of
 * tests/helpers/fake_iggy on a real socket). QoS 1 publishers (MQTT.js, 3.1.1 and 5) and
 * stored-session subscribers (MQTT.js and Paho, 3.1.1 and 5) reconnect at random through HAProxy
 * while the gateways are stopped (as on SIGTERM) and started again one at a time. Checked at the end:
 * - no PUBACKed message lost: each reached at least one subscriber of its filter;
 * - every subscriber got every message of its filter PUBACKed after its SUBACK, at least once,
 *   and found its session present on every reconnect;
 * - how long a client id was live on two gateways at once, for ordinary reconnects (the old
 *   connection closed first) and for "twins" (a device that reconnects while its old connection
 *   is half-open: the old one stays until its gateway closes it, or 10 s at most);
 * - the retained set is the same on the three gateways (and how long they took to agree); with a
 *   real Iggy, a share group's members (MQTT.js) got every message of the group at least once
 *   between them, and how many partitions each gateway deals is reported (a count: which ones
 *   is not visible from outside the gateway).
 *
 * Run by hand (full size, 60 s): `deno task soak:gateways` (add `-- --iggy 127.0.0.1:8090` for
 * a real Iggy); tests/soak/many_gateways_test.ts runs a short one.
 */
import mqtt from "mqtt";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import {
  freeFixedPort,
  hasCommand,
  startGateway,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";
import { parseArgs } from "node:util";

const CONFIG = new URL("../fixtures/haproxy/gateways.cfg", import.meta.url).pathname;
const PAHO = new URL("../clients/paho_soak.py", import.meta.url).pathname;
const HOSTS = ["127.0.0.11", "127.0.0.12", "127.0.0.13"];
/** Topic groups: subscriber j takes `soak/g<j % GROUPS>/+`. */
const GROUPS = 10;
const SHARE_FILTER = "$share/soak/soak/share/+";
/** MQTT.js subscribers in the share group (real Iggy only: the fake has no consumer groups). */
const SHARE_MEMBERS = 4;
/** A twin's old connection is dropped after this at most (a device's TCP giving up). */
const TWIN_LIFE_MS = 10_000;

/** What a soak run is given. */
export interface SoakOptions {
  readonly durationMs: number;
  readonly publishers: number;
  readonly subscribers: number;
  /** How many of the subscribers are Paho's (half 3.1.1, half 5); the rest MQTT.js. */
  readonly paho: number;
  /** Mean seconds between a client's own reconnects. */
  readonly reconnectMeanS: number;
  /** A real Iggy's host:port; "" for the fake one. */
  readonly iggy: string;
  readonly log?: (line: string) => void;
}

/** One stretch of a client id live on two gateways at once. */
interface Overlap {
  readonly id: string;
  readonly ms: number;
  readonly twin: boolean;
}

/** What a soak run found. */
export interface SoakReport {
  readonly acked: number;
  readonly unacked: number;
  readonly lost: number;
  readonly missing: Record<string, number>;
  readonly sessionsLost: number;
  readonly restarts: number;
  readonly stopMs: number[];
  readonly told: Record<string, number>;
  readonly twins: number;
  readonly maxOverlapMs: number;
  readonly maxTwinOverlapMs: number;
  readonly overlaps: Overlap[];
  readonly retainedAgreeMs: number | null;
  readonly shareDealt: number[] | null;
}

interface Acked {
  readonly topic: string;
  readonly payload: string;
  readonly sentAt: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const expo = (meanMs: number) => -Math.log(1 - Math.random()) * meanMs;

/** A stored-session subscriber, of either client library. */
interface Sub {
  readonly id: string;
  readonly filter: string;
  subscribedAt: number | null;
  readonly got: Set<string>;
}

/** The fleet: three gateways at fixed addresses, HAProxy in front. */
class Fleet {
  readonly gws: (TestGateway | null)[] = [null, null, null];
  readonly mqttPort = freeFixedPort();
  readonly httpPort = freeFixedPort();
  readonly front = freeFixedPort();
  readonly stopMs: number[] = [];
  #haproxy: Deno.ChildProcess | null = null;
  #haproxyLog: Promise<string> | null = null;

  constructor(readonly iggyAddress: string, readonly suffix: string) {}

  env(i: number): Record<string, string> {
    return {
      IGGY_MQTT_GATEWAY_BACKEND: "iggy",
      IGGY_MQTT_GATEWAY_ID: `gw${i + 1}`,
      IGGY_MQTT_GATEWAY_LOG_LEVEL: "info",
      IGGY_MQTT_GATEWAY_DRAIN_TIMEOUT_MS: "5000",
      IGGY_MQTT_IGGY_ADDRESS: this.iggyAddress,
      IGGY_MQTT_IGGY_USERNAME: "iggy",
      IGGY_MQTT_IGGY_PASSWORD: "iggy",
      IGGY_MQTT_SESSION_STORE_STREAM: `mqtt_gateway_${this.suffix}`,
      IGGY_MQTT_LISTENERS_TCP: `${HOSTS[i]}:${this.mqttPort}`,
      IGGY_MQTT_LISTENERS_HTTP: `${HOSTS[i]}:${this.httpPort}`,
      IGGY_MQTT_LISTENERS_PROXY_PROTOCOL_FROM: "127.0.0.1",
      IGGY_MQTT_MQTT5_SERVER_REFERENCE: `127.0.0.1:${this.front}`,
    };
  }

  async start(i: number): Promise<void> {
    this.gws[i] = await startGateway({ env: this.env(i), map: MAP(this.suffix) });
  }

  /** Stops gateway `i` as SIGTERM does, starts it again; resolves once it is ready. */
  async restart(i: number): Promise<void> {
    const gw = this.gws[i]!;
    this.gws[i] = null;
    await gw.stop();
    const stopped = gw.logs.map((l) => JSON.parse(l)).find((l) => l.msg === "Gateway stopped");
    this.stopMs.push(stopped?.stop_ms ?? -1);
    await this.start(i);
  }

  startHaproxy(): Promise<void> {
    const spare = String(freeFixedPort());
    this.#haproxy = new Deno.Command("haproxy", {
      args: ["-db", "-f", CONFIG],
      env: {
        MQTT_BIND: `127.0.0.1:${this.front}`,
        MQTTS_BIND: `127.0.0.1:${freeFixedPort()}`,
        WS_BIND: `127.0.0.1:${freeFixedPort()}`,
        GW1: HOSTS[0],
        GW2: HOSTS[1],
        GW3: HOSTS[2],
        GW_MQTT_PORT: String(this.mqttPort),
        GW_MQTTS_PORT: spare,
        GW_WS_PORT: spare,
        GW_HTTP_PORT: String(this.httpPort),
      },
      stdout: "null",
      stderr: "piped",
    }).spawn();
    this.#haproxyLog = new Response(this.#haproxy.stderr).text();
    return waitFor(
      async () => {
        try {
          (await Deno.connect({ hostname: "127.0.0.1", port: this.front })).close();
          return true;
        } catch {
          return false;
        }
      },
      10_000,
      "haproxy to listen",
    );
  }

  async close(): Promise<string> {
    for (const gw of this.gws) await gw?.stop();
    try {
      this.#haproxy?.kill("SIGTERM");
    } catch { /* exited: its log says why */ }
    await this.#haproxy?.status;
    return await this.#haproxyLog ?? "";
  }
}

const MAP = (suffix: string) => `
default_stream = "soak_${suffix}"
default_topic = "other"
[[rule]]
mqtt_topic = 'soak/(\\w+)/.*'
stream = 'soak_${suffix}'
topic = '$1'
partition_key = '$1'
`;

/** Runs the soak; see the module comment for what it checks. */
export async function soakManyGateways(o: SoakOptions): Promise<SoakReport> {
  if (o.subscribers < GROUPS) {
    throw new Error(`at least ${GROUPS} subscribers: one per topic group`);
  }
  const log = o.log ?? (() => {});
  const node = o.iggy === "" ? new FakeNode({ dialect: "0.11", store: new FakeStore() }) : null;
  const fleet = new Fleet(node?.listen() ?? o.iggy, crypto.randomUUID().slice(0, 8));
  // Every topic group needs a subscriber, and the share members are MQTT.js clients.
  const shares = o.iggy !== "" && o.subscribers - o.paho >= SHARE_MEMBERS &&
    o.subscribers - SHARE_MEMBERS >= GROUPS;
  if (o.subscribers < GROUPS) {
    throw new Error(`at least ${GROUPS} subscribers: one per topic group`);
  }
  const state = new Soak(fleet, o, shares);
  try {
    for (let i = 0; i < 3; i++) await fleet.start(i);
    await fleet.startHaproxy();
    await waitFor(() => healthy(fleet), 15_000, "haproxy to see three gateways up");
    await state.subscribeAll();
    log(`${state.subs.length} subscribers subscribed; publishing for ${o.durationMs} ms`);
    const publishing = state.publishAll();
    const churn = state.churnSubscribers();
    await state.restartOneAtATime(log);
    state.stopping = true;
    await Promise.all([publishing, churn]);
    log("restarts done; the retained topics get their last values");
    await state.finalRetained();
    log(`publishing done: ${state.acked.length} PUBACKed; waiting for the subscribers`);
    return await state.report();
  } finally {
    await state.closeClients();
    const haproxyLog = await fleet.close();
    if (haproxyLog.includes("ALERT")) log(`haproxy: ${haproxyLog}`);
    await node?.close();
  }
}

async function healthy(fleet: Fleet): Promise<boolean> {
  const ready = await Promise.all(
    HOSTS.map((h) =>
      fetch(`http://${h}:${fleet.httpPort}/ready`).then(
        (r) => (r.body?.cancel(), r.ok),
        () => false,
      )
    ),
  );
  // HAProxy marks a server up after `rise 2` checks `inter 2s` apart.
  return ready.every(Boolean);
}

/** The clients and what they saw. */
class Soak {
  readonly acked: Acked[] = [];
  unacked = 0;
  readonly subs: Sub[] = [];
  readonly #js = new Map<string, mqtt.MqttClient[]>();
  readonly #twinUntil = new Map<string, number>();
  readonly overlaps: Overlap[] = [];
  readonly told = new Map<string, number>();
  readonly finals = new Map<string, string>();
  sessionsLost = 0;
  twins = 0;
  stopping = false;
  #paho: Deno.ChildProcess | null = null;
  #pahoDone: Promise<void> | null = null;

  constructor(readonly fleet: Fleet, readonly o: SoakOptions, readonly shares: boolean) {}

  get url(): string {
    return `mqtt://127.0.0.1:${this.fleet.front}`;
  }

  /** The first SHARE_MEMBERS (real Iggy) share a group; the rest take the groups in turn. */
  filterOf(j: number): string {
    const members = this.shares ? SHARE_MEMBERS : 0;
    return j < members ? SHARE_FILTER : `soak/g${(j - members) % GROUPS}/+`;
  }

  async subscribeAll(): Promise<void> {
    const jsCount = this.o.subscribers - this.o.paho;
    for (let j = 0; j < jsCount; j++) this.#jsSubscriber(j);
    if (this.o.paho > 0) this.#pahoSubscribers(jsCount);
    await waitFor(() => this.subs.every((s) => s.subscribedAt !== null), 30_000, "every SUBACK");
    this.#sampleOverlaps();
  }

  #jsSubscriber(j: number): void {
    const sub: Sub = {
      id: `js-sub-${j}`,
      filter: this.filterOf(j),
      subscribedAt: null,
      got: new Set(),
    };
    this.subs.push(sub);
    this.#js.set(sub.id, []);
    this.#connectJs(sub, j % 2 === 0 ? 5 : 4);
  }

  #connectJs(sub: Sub, version: 4 | 5): mqtt.MqttClient {
    const c = mqtt.connect(this.url, {
      clientId: sub.id,
      protocolVersion: version,
      clean: false,
      properties: version === 5 ? { sessionExpiryInterval: 3600 } : undefined,
      reconnectPeriod: 200,
      connectTimeout: 3000,
      resubscribe: false,
      keepalive: 20,
    });
    this.#js.get(sub.id)!.push(c);
    c.on("error", () => {});
    c.on("message", (_t, p) => sub.got.add(p.toString()));
    c.on("disconnect", (p) => {
      const key = `${p.reasonCode}${p.properties?.serverReference ? " ref" : ""}`;
      this.told.set(key, (this.told.get(key) ?? 0) + 1);
    });
    c.on("connect", (ack) => {
      if (sub.subscribedAt === null) {
        c.subscribe(sub.filter, { qos: 1 }, (err, granted) => {
          if (!err && granted?.[0]?.qos === 1) sub.subscribedAt ??= performance.now();
        });
      } else if (!ack.sessionPresent) this.sessionsLost++;
    });
    return c;
  }

  #pahoSubscribers(first: number): void {
    const specs: string[] = [];
    for (let k = 0; k < this.o.paho; k++) {
      const j = first + k;
      const sub: Sub = {
        id: `paho-sub-${j}`,
        filter: this.filterOf(j),
        subscribedAt: null,
        got: new Set(),
      };
      this.subs.push(sub);
      specs.push(`${sub.id},${k % 2 === 0 ? "5" : "3.1.1"},${sub.filter}`);
    }
    const byId = new Map(this.subs.map((s) => [s.id, s]));
    this.#paho = new Deno.Command("python3", {
      args: [PAHO, String(this.fleet.front), String(this.o.reconnectMeanS), ...specs],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    let rest = "";
    this.#pahoDone = this.#paho.stdout.pipeThrough(new TextDecoderStream()).pipeTo(
      new WritableStream({
        write: (chunk) => {
          const lines = (rest + chunk).split("\n");
          rest = lines.pop()!;
          for (const line of lines) this.#pahoLine(line, byId);
        },
      }),
    );
  }

  #pahoLine(line: string, byId: Map<string, Sub>): void {
    const [what, id, ...more] = line.split(" ");
    const sub = byId.get(id);
    if (what === "msg") sub?.got.add(more[0]);
    else if (what === "subscribed" && sub) sub.subscribedAt = performance.now();
    else if (what === "lost") this.sessionsLost++;
    else if (what === "told") {
      const key = `${more[0]}${more[1] !== "-" ? " ref" : ""}`;
      this.told.set(key, (this.told.get(key) ?? 0) + 1);
    }
  }

  /** Every 100 ms: which subscriber client ids are live on more than one gateway. */
  #sampleOverlaps(): void {
    const since = new Map<string, number>();
    const timer = setInterval(() => {
      const now = performance.now();
      for (const s of this.subs) {
        const live = this.fleet.gws.filter((g) => g?.view.isConnected(s.id)).length;
        if (live > 1) since.set(s.id, since.get(s.id) ?? now);
        else if (since.has(s.id)) {
          const twin = (this.#twinUntil.get(s.id) ?? 0) > since.get(s.id)!;
          this.overlaps.push({ id: s.id, ms: Math.round(now - since.get(s.id)!), twin });
          since.delete(s.id);
        }
      }
      if (this.stopping) clearInterval(timer);
    }, 100);
  }

  /** MQTT.js subscribers reconnect at random: closed first, dropped, or as a twin. */
  async churnSubscribers(): Promise<void> {
    const js = this.subs.filter((s) => this.#js.has(s.id));
    while (!this.stopping && js.length > 0) {
      await sleep(expo((this.o.reconnectMeanS * 1000) / js.length));
      const sub = js[Math.floor(Math.random() * js.length)];
      const clients = this.#js.get(sub.id)!;
      const old = clients[clients.length - 1];
      const version = old.options.protocolVersion as 4 | 5;
      const mode = Math.random();
      if (mode < 0.4) {
        old.end(true);
        await sleep(Math.random() * 500);
        this.#connectJs(sub, version);
      } else if (mode < 0.8) {
        old.stream?.destroy(); // the network dropped it: MQTT.js reconnects by itself
      } else {
        old.options.reconnectPeriod = 0; // half-open: it stays until a gateway closes it
        this.twins++;
        this.#twinUntil.set(sub.id, performance.now() + TWIN_LIFE_MS);
        this.#connectJs(sub, version);
        setTimeout(() => old.end(true), TWIN_LIFE_MS);
      }
    }
  }

  async publishAll(): Promise<void> {
    await Promise.all(Array.from({ length: this.o.publishers }, (_, i) => this.#publisher(i)));
  }

  #topicOf(i: number): string {
    return this.shares && i % GROUPS === 0 ? `soak/share/p${i}` : `soak/g${i % GROUPS}/p${i}`;
  }

  async #publisher(i: number): Promise<void> {
    const topic = this.#topicOf(i);
    let c: mqtt.MqttClient | null = null;
    for (let seq = 0; !this.stopping;) {
      c ??= await this.#connectPublisher(i);
      if (c === null) {
        await sleep(100 + Math.random() * 400);
        continue;
      }
      const payload = `p${i}-${seq++}`;
      const retain = i < GROUPS && seq % 5 === 0;
      const sentAt = performance.now();
      if (await acked(c, retain ? `soak/retained/p${i}` : topic, payload, retain)) {
        this.acked.push({ topic: retain ? `soak/retained/p${i}` : topic, payload, sentAt });
      } else {
        this.unacked++;
        c.end(true);
        c = null;
        continue;
      }
      if (Math.random() < 0.02) {
        c.end(Math.random() < 0.5);
        c = null;
      }
      await sleep(250 + Math.random() * 500);
    }
    c?.end(true);
  }

  async #connectPublisher(i: number): Promise<mqtt.MqttClient | null> {
    const c = mqtt.connect(this.url, {
      clientId: `pub-${i}`,
      protocolVersion: i % 2 === 0 ? 5 : 4,
      reconnectPeriod: 0,
      connectTimeout: 3000,
    });
    c.on("error", () => {});
    const up = await new Promise<boolean>((r) => {
      c.once("connect", () => r(true));
      c.once("close", () => r(false));
      setTimeout(() => r(false), 5000);
    });
    if (!up) c.end(true);
    return up ? c : null;
  }

  /** Gateway 1, 2, 3, 1, … stopped and started again, for the whole duration. */
  async restartOneAtATime(log: (line: string) => void): Promise<void> {
    const end = performance.now() + this.o.durationMs;
    const pause = Math.max(1000, this.o.durationMs / 6);
    for (let i = 0; performance.now() + pause < end; i = (i + 1) % 3) {
      await sleep(pause);
      log(`restarting gw${i + 1}`);
      await this.fleet.restart(i);
      log(`gw${i + 1} started again`);
      await waitFor(() => healthy(this.fleet), 15_000, "the restarted gateway ready");
    }
    await sleep(Math.max(0, end - performance.now()));
  }

  /** Each retained topic gets one last PUBACKed value: what every gateway must hold. */
  async finalRetained(): Promise<void> {
    for (let i = 0; i < Math.min(GROUPS, this.o.publishers); i++) {
      const topic = `soak/retained/p${i}`;
      for (;;) {
        const c = await this.#connectPublisher(i);
        const ok = c !== null && await acked(c, topic, `final-p${i}`, true);
        c?.end(true);
        if (ok) break;
        await sleep(200);
      }
      this.finals.set(topic, `final-p${i}`);
    }
  }

  #expected(s: Sub): Acked[] {
    const share = s.filter === SHARE_FILTER;
    const prefix = share ? "soak/share/" : s.filter.slice(0, -1);
    const since = share
      ? Math.min(...this.subs.filter((x) => x.filter === SHARE_FILTER).map((x) => x.subscribedAt!))
      : s.subscribedAt!;
    return this.acked.filter((m) => m.topic.startsWith(prefix) && m.sentAt > since);
  }

  #missing(): Record<string, number> {
    const out: Record<string, number> = {};
    const shareGot = new Set(
      this.subs.filter((s) => s.filter === SHARE_FILTER).flatMap((s) => [...s.got]),
    );
    for (const s of this.subs) {
      const got = s.filter === SHARE_FILTER ? shareGot : s.got;
      const n = this.#expected(s).filter((m) => !got.has(m.payload)).length;
      if (n > 0) out[s.id] = n;
    }
    return out;
  }

  async report(): Promise<SoakReport> {
    await waitFor(() => Object.keys(this.#missing()).length === 0, 20_000, "delivery").catch(
      () => {},
    );
    const received = new Set(this.subs.flatMap((s) => [...s.got]));
    const lost = this.acked.filter((m) =>
      !m.topic.startsWith("soak/retained/") && !received.has(m.payload)
    );
    const agreeStart = performance.now();
    const agree = await waitFor(() => this.#retainedAgree(), 15_000, "retained").then(
      () => true,
      () => false,
    );
    const ordinary = this.overlaps.filter((x) => !x.twin).map((x) => x.ms);
    const twin = this.overlaps.filter((x) => x.twin).map((x) => x.ms);
    return {
      acked: this.acked.length,
      unacked: this.unacked,
      lost: lost.length,
      missing: this.#missing(),
      sessionsLost: this.sessionsLost,
      restarts: this.fleet.stopMs.length,
      stopMs: this.fleet.stopMs,
      told: Object.fromEntries(this.told),
      twins: this.twins,
      maxOverlapMs: Math.max(0, ...ordinary),
      maxTwinOverlapMs: Math.max(0, ...twin),
      overlaps: this.overlaps,
      retainedAgreeMs: agree ? Math.round(performance.now() - agreeStart) : null,
      shareDealt: this.shares ? await this.#shareDealtSettled() : null,
    };
  }

  #retainedAgree(): boolean {
    return this.fleet.gws.every((g) => {
      const held = g!.view.retainedPayloads();
      return [...this.finals].every(([t, v]) => held.get(t) === v);
    });
  }

  /**
   * Per gateway: partitions of the share group's topic it deals, once the count stood still for
   * three of the share spread's syncs (0.5 s each), 10 s at most.
   */
  async #shareDealtSettled(): Promise<number[]> {
    let last = "", same = 0;
    for (let i = 0; i < 20 && same < 3; i++) {
      await sleep(500);
      const now = JSON.stringify(this.#shareDealt());
      same = now === last ? same + 1 : 0;
      last = now;
      this.o.log?.(`share partitions dealt per gateway: ${now}`);
    }
    return JSON.parse(last);
  }

  /** Per gateway: partitions of the share group's topic it deals. */
  #shareDealt(): number[] {
    return this.fleet.gws.map((g) =>
      g!.view.shareGroups().filter((s) => s.group === "soak/soak/share/+")
        .reduce((n, s) => n + (s.partitions ?? 0), 0)
    );
  }

  async closeClients(): Promise<void> {
    this.stopping = true;
    for (const clients of this.#js.values()) for (const c of clients) c.end(true);
    if (this.#paho !== null) {
      const w = this.#paho.stdin.getWriter();
      await w.write(new TextEncoder().encode("stop\n")).catch(() => {});
      await w.close().catch(() => {});
      await this.#pahoDone;
      await this.#paho.status;
    }
  }
}

/**
 * What a report shows that must not be. The twins' overlap and the share partitions dealt are
 * measured, not judged here.
 */
export function failures(r: SoakReport): string[] {
  const out: string[] = [];
  if (r.lost > 0) out.push(`${r.lost} PUBACKed messages reached no subscriber`);
  const missing = Object.entries(r.missing);
  if (missing.length > 0) out.push(`subscribers missing messages: ${JSON.stringify(r.missing)}`);
  if (r.sessionsLost > 0) out.push(`${r.sessionsLost} reconnects found no session`);
  if (r.retainedAgreeMs === null) out.push("the gateways' retained sets did not agree");
  return out;
}

/** Publishes at QoS 1; true once PUBACKed, false when the connection ended first (or 5 s). */
async function acked(c: mqtt.MqttClient, topic: string, payload: string, retain: boolean) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((r) => timer = setTimeout(() => r(false), 5000));
  try {
    return await Promise.race([
      c.publishAsync(topic, payload, { qos: 1, retain }).then(() => true, () => false),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    // `deno task soak:gateways -- --seconds 120` passes the "--" through.
    args: Deno.args[0] === "--" ? Deno.args.slice(1) : Deno.args,
    options: {
      seconds: { type: "string" },
      publishers: { type: "string" },
      subscribers: { type: "string" },
      paho: { type: "string" },
      iggy: { type: "string" },
    },
  });
  const num = (v: string | undefined, d: number) => v === undefined ? d : Number(v);
  const o: SoakOptions = {
    durationMs: num(values.seconds, 60) * 1000,
    publishers: num(values.publishers, 200),
    subscribers: num(values.subscribers, 50),
    paho: num(values.paho, 12),
    reconnectMeanS: 15,
    iggy: values.iggy ?? Deno.env.get("IGGY_TEST_ADDRESS") ?? "",
    log: (l) => console.log(`${new Date().toISOString()} ${l}`),
  };
  if (!hasCommand("haproxy") || (o.paho > 0 && !hasCommand("python3"))) {
    console.error("soak: needs haproxy (Debian package haproxy) and python3 with paho-mqtt");
    Deno.exit(2);
  }
  const where = o.iggy === "" ? "the fake Iggy" : `Iggy at ${o.iggy}`;
  console.log(`soak on ${where}: ${JSON.stringify({ ...o, log: undefined })}`);
  const r = await soakManyGateways(o);
  console.log(JSON.stringify({ ...r, overlaps: r.overlaps.filter((x) => x.ms >= 1000) }, null, 2));
  Deno.exit(failures(r).length === 0 ? 0 : 1);
}

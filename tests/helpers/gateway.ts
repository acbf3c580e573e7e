/**
 * Test harness: an in-process gateway on port 0 with a temporary embedded store, plus raw
 * socket helpers. Tests talk to it over real sockets with real clients.
 *
 * @module
 */
import { concatBytes } from "../../src/base/bytes.ts";
import { loadConfig } from "../../src/config/load.ts";
import type { GatewayConfig } from "../../src/config/types.ts";
import { Gateway, type GatewayOverrides } from "../../src/gateway.ts";
import { GatewayView } from "../../src/gateway_view.ts";
import { compileMap } from "../../src/mapping/mod.ts";
import { Logger } from "../../src/observe/logger.ts";
import { remainingLength } from "../../src/codec/encoder.ts";

/** The quick-start map of DESIGN §3. */
export const DESIGN_MAP = `
default_stream = "sensors"
default_topic = "messages_default"

[[rule]]
mqtt_topic = 'building/(\\w+)/room/(\\d+)/.*'
stream = 'building_$1'
topic = 'telemetry'
partition_key = 'room_$2'

[[rule]]
mqtt_topic = 'sensors/([^/]+)/data'
stream = 'sensors'
topic = 'sensor_data'
partition_key = 'sensor_$1'
`;

/** A running test gateway. */
export interface TestGateway {
  /** Its operations (reload, stop); read state through `view`, not the gateway's fields. */
  readonly gateway: Gateway;
  /** What the gateway holds and counts, read-only. */
  readonly view: GatewayView;
  readonly config: GatewayConfig;
  readonly port: number;
  readonly httpPort: number;
  /** The WebSocket listener's port (`listeners.ws` set), else null. */
  readonly wsPort: number | null;
  /** The secure WebSocket listener's port (`listeners.wss` set), else null. */
  readonly wssPort: number | null;
  readonly dir: string;
  readonly logs: string[];
  stop(): Promise<void>;
}

/** Options for {@link startGateway}. */
export interface StartOptions {
  /** Extra TOML appended to the base config (tables must not repeat base tables). */
  readonly toml?: string;
  /** Env overlay (IGGY_MQTT_*). */
  readonly env?: Record<string, string>;
  readonly map?: string;
  readonly overrides?: Omit<GatewayOverrides, "map" | "logger">;
}

/**
 * The test gateways' environment: listeners on port 0, anonymous clients from loopback,
 * auto-create, a store in `dir`, debug logs; `overlay` wins.
 */
export function testEnv(dir: string, overlay: Record<string, string> = {}): Record<string, string> {
  return {
    IGGY_MQTT_LISTENERS_TCP: "127.0.0.1:0",
    IGGY_MQTT_LISTENERS_HTTP: "127.0.0.1:0",
    IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "true",
    IGGY_MQTT_LOG_AUTO_CREATE: "true",
    IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db`,
    IGGY_MQTT_GATEWAY_LOG_LEVEL: "debug",
    // Every test client comes from 127.0.0.1: the per-source rate limit has its own test.
    IGGY_MQTT_LIMITS_MAX_CONNECTION_RATE_PER_SOURCE: "0",
    ...overlay,
  };
}

/**
 * Starts a gateway on 127.0.0.1 port 0 with anonymous access from loopback, auto_create on
 * (3 partitions) and a temp store. Env can override any key.
 */
export async function startGateway(o: StartOptions = {}): Promise<TestGateway> {
  const dir = await Deno.makeTempDir({ prefix: "iggy-mqtt-test-" });
  const env = testEnv(dir, o.env);
  const config = loadConfig({ text: o.toml ?? "", source: "test.toml", env });
  const logs: string[] = [];
  const logger = new Logger(config.gateway.log_level, (l) => logs.push(l));
  const gateway = await Gateway.create(config, {
    ...o.overrides,
    logger,
    map: compileMap(o.map ?? DESIGN_MAP, "test-map.toml"),
  });
  const ports = await gateway.start();
  let stopped = false;
  return {
    gateway,
    view: new GatewayView(gateway),
    config,
    port: ports.tcp ?? ports.tls!,
    httpPort: ports.http!,
    wsPort: ports.ws ?? null,
    wssPort: ports.wss ?? null,
    dir,
    logs,
    async stop() {
      if (stopped) return;
      stopped = true;
      await gateway.stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

/** A raw MQTT socket for byte-exact tests. */
export class RawClient {
  #conn: Deno.TcpConn;
  #buf: Uint8Array = new Uint8Array(0);
  constructor(conn: Deno.TcpConn) {
    this.#conn = conn;
  }

  static async connect(port: number): Promise<RawClient> {
    return new RawClient(await Deno.connect({ hostname: "127.0.0.1", port }));
  }

  async send(bytes: Uint8Array | number[]): Promise<void> {
    const b = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    let off = 0;
    while (off < b.length) off += await this.#conn.write(b.subarray(off));
  }

  /** The read in flight, kept across timeouts so no data is lost to an abandoned read. */
  #pendingRead: Promise<Uint8Array | null> | null = null;

  #readChunk(): Promise<Uint8Array | null> {
    if (!this.#pendingRead) {
      const chunk = new Uint8Array(65536);
      this.#pendingRead = this.#conn.read(chunk).then(
        (n) => (n === null ? null : chunk.subarray(0, n)),
        () => null,
      );
    }
    return this.#pendingRead;
  }

  /** Reads exactly n bytes, or returns null if the peer closed first (or on timeout). */
  async readExactly(n: number, timeoutMs = 3000): Promise<Uint8Array | null> {
    const deadline = Date.now() + timeoutMs;
    while (this.#buf.length < n) {
      const left = deadline - Date.now();
      if (left <= 0) return null;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const r = await Promise.race([
        this.#readChunk(),
        new Promise<"timeout">((res) => timer = setTimeout(() => res("timeout"), left)),
      ]);
      clearTimeout(timer);
      if (r === "timeout") return null;
      this.#pendingRead = null;
      if (r === null) return null;
      this.#buf = concatBytes([this.#buf, r]);
    }
    const out = this.#buf.slice(0, n);
    this.#buf = this.#buf.slice(n);
    return out;
  }

  /** Reads one whole MQTT packet (fixed header + body), or null when the peer closed. */
  async readPacket(timeoutMs = 3000): Promise<Uint8Array | null> {
    const first = await this.readExactly(1, timeoutMs);
    if (first === null) return null;
    let remaining = 0;
    let mult = 1;
    const header = [first[0]];
    for (;;) {
      const d = await this.readExactly(1, timeoutMs);
      if (d === null) return null;
      header.push(d[0]);
      remaining += (d[0] & 0x7f) * mult;
      if ((d[0] & 0x80) === 0) break;
      mult *= 128;
    }
    const body = remaining === 0 ? new Uint8Array(0) : await this.readExactly(remaining, timeoutMs);
    if (body === null) return null;
    return new Uint8Array([...header, ...body]);
  }

  /** True when the peer closes the connection within the timeout (data is buffered). */
  async closedByPeer(timeoutMs = 3000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const r = await Promise.race([
        this.#readChunk(),
        new Promise<"timeout">((res) =>
          timer = setTimeout(() => res("timeout"), Math.max(1, deadline - Date.now()))
        ),
      ]);
      clearTimeout(timer);
      if (r === "timeout") return false;
      this.#pendingRead = null;
      if (r === null) return true;
      this.#buf = concatBytes([this.#buf, r]);
    }
    return false;
  }

  close(): void {
    try {
      this.#conn.close();
    } catch { /* closed */ }
  }
}

/** Encodes a minimal MQTT 3.1.1 CONNECT. */
export function connectPacket(
  clientId: string,
  o: { keepAlive?: number; username?: string; password?: string; clean?: boolean } = {},
): Uint8Array {
  const enc = new TextEncoder();
  const str = (s: string) => {
    const b = enc.encode(s);
    return [b.length >> 8, b.length & 0xff, ...b];
  };
  let flags = o.clean === false ? 0 : 0x02;
  const payload = [...str(clientId)];
  if (o.username !== undefined) {
    flags |= 0x80;
    payload.push(...str(o.username));
  }
  if (o.password !== undefined) {
    flags |= 0x40;
    payload.push(...str(o.password));
  }
  const ka = o.keepAlive ?? 60;
  const body = [...str("MQTT"), 4, flags, ka >> 8, ka & 0xff, ...payload];
  return new Uint8Array([0x10, ...varint(body.length), ...body]);
}

/** Encodes a PUBLISH (QoS 0, 1 or 2; `dup` sets the DUP flag). */
export function publishPacket(
  topic: string,
  payload: string | Uint8Array,
  qos: 0 | 1 | 2,
  id = 1,
  dup = false,
): Uint8Array {
  const enc = new TextEncoder();
  const t = enc.encode(topic);
  const p = typeof payload === "string" ? enc.encode(payload) : payload;
  const body = [t.length >> 8, t.length & 0xff, ...t, ...(qos ? [id >> 8, id & 0xff] : []), ...p];
  return new Uint8Array([0x30 | (dup ? 8 : 0) | (qos << 1), ...varint(body.length), ...body]);
}

/** Encodes a SUBSCRIBE of exact topics. */
export function subscribePacket(id: number, filters: [string, number][]): Uint8Array {
  const enc = new TextEncoder();
  const body = [id >> 8, id & 0xff];
  for (const [f, q] of filters) {
    const b = enc.encode(f);
    body.push(b.length >> 8, b.length & 0xff, ...b, q);
  }
  return new Uint8Array([0x82, ...varint(body.length), ...body]);
}

/** MQTT variable-length integer (the gateway's own encoder). */
export const varint = remainingLength;

/** CONNECT + expect CONNACK 0; returns the client. */
export async function connectRaw(
  port: number,
  clientId: string,
  keepAlive = 60,
): Promise<RawClient> {
  const c = await RawClient.connect(port);
  await c.send(connectPacket(clientId, { keepAlive }));
  const ack = await c.readPacket();
  if (ack === null || ack[0] !== 0x20 || ack[3] !== 0) {
    throw new Error(`CONNACK expected, got ${ack && [...ack]}`);
  }
  return c;
}

/** PINGREQ barrier: everything the gateway sent before the PINGRESP is returned. */
export async function pingBarrier(c: RawClient, timeoutMs = 3000): Promise<Uint8Array[]> {
  await c.send([0xc0, 0x00]);
  const before: Uint8Array[] = [];
  for (;;) {
    const p = await c.readPacket(timeoutMs);
    if (p === null) throw new Error("connection closed before PINGRESP");
    if (p[0] === 0xd0) return before;
    before.push(p);
  }
}

/** Runs a command; returns code, stdout and stderr. */
export async function run(
  cmd: string,
  args: string[],
  opts: { env?: Record<string, string>; stdin?: string; cwd?: string; timeoutMs?: number } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const p = new Deno.Command(cmd, {
    args,
    env: opts.env,
    cwd: opts.cwd,
    stdin: opts.stdin !== undefined ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (opts.stdin !== undefined) {
    const w = p.stdin.getWriter();
    await w.write(new TextEncoder().encode(opts.stdin));
    await w.close();
  }
  const timer = setTimeout(() => {
    try {
      p.kill("SIGKILL");
    } catch { /* gone */ }
  }, opts.timeoutMs ?? 30_000);
  const out = await p.output();
  clearTimeout(timer);
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** True when a command exists on PATH. */
export function hasCommand(name: string): boolean {
  try {
    const r = new Deno.Command("sh", {
      args: ["-c", `command -v ${name}`],
      stdout: "null",
      stderr: "null",
    })
      .outputSync();
    return r.success;
  } catch {
    return false;
  }
}

/** mosquitto clients present? Tests that need them are ignored (loudly) when absent. */
export const HAS_MOSQUITTO_CLIENTS = hasCommand("mosquitto_pub") && hasCommand("mosquitto_sub");
if (!HAS_MOSQUITTO_CLIENTS) {
  console.warn(
    "WARNING: mosquitto_pub/mosquitto_sub not found; tests with Mosquitto's clients are SKIPPED " +
      "(install Debian package mosquitto-clients).",
  );
}

export { waitFor } from "./wait.ts";

/** A port free now on 127.0.0.1 (the OS's pick; it may be taken again before it is used). */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/**
 * A port for a gateway process the test must reach at a known address (restarts, config
 * files): free when chosen, and below Linux's ephemeral range (32768+) so that no outgoing
 * socket of a test running beside it can take it meanwhile.
 */
export function freeFixedPort(): number {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    try {
      Deno.listen({ hostname: "127.0.0.1", port }).close();
      return port;
    } catch { /* taken: try another */ }
  }
}

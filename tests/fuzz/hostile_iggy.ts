/**
 * Process-level rounds against a hostile Iggy: an in-process gateway, in Iggy mode or in
 * forward mode, talks to the fake Iggy (dialect 0.11 or 0.12) through {@link startHostileProxy},
 * which corrupts a fraction of the reply frames. Devices publish QoS 1 and a subscriber reads
 * while it does; after each batch the proxy turns calm and a witness client must get its
 * PUBACK within {@link WITNESS_MS} (the gateway recovered), and at the end every message that
 * was PUBACKed, by the witness or a device, must be in the fake Iggy (nothing acknowledged
 * lost; in forward mode once the forwarder caught up). Unhandled rejections are caught by the
 * caller ({@link fuzz}); log lines naming a programming error (a TypeError and the like) count
 * as crashes here.
 *
 * @module
 */
import mqtt from "mqtt";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { connectRaw, publishPacket, type RawClient, startGateway } from "../helpers/gateway.ts";
import { type HostileProxy, startHostileProxy } from "./hostile_proxy.ts";

/** How long the witness may wait for its PUBACK once the proxy is calm. */
export const WITNESS_MS = 10_000;
/** How long the forwarder may take to bring every PUBACKed message to Iggy once calm. */
const DRAIN_MS = 15_000;

/** A gateway's mode and the dialect its Iggy speaks. */
export interface HostileSetup {
  readonly mode: "iggy" | "forward";
  readonly dialect: "0.11" | "0.12";
}

/** The four setups a full run goes through. */
export const SETUPS: readonly HostileSetup[] = [
  { mode: "iggy", dialect: "0.11" },
  { mode: "iggy", dialect: "0.12" },
  { mode: "forward", dialect: "0.11" },
  { mode: "forward", dialect: "0.12" },
];

/** What one round found. */
export interface HostileRoundResult {
  batches: number;
  /** Reply frames through the proxy, and how many it corrupted, by kind. */
  frames: number;
  corrupted: Record<string, number>;
  witnessAcks: number;
  /** Messages PUBACKed (witness and devices), all found in Iggy unless a finding says so. */
  acked: number;
  delivered: number;
  findings: string[];
}

/** Lines a gateway logs only for a bug of its own, not for a broken peer. */
const BUG_LINE =
  /TypeError|RangeError|ReferenceError|SyntaxError|is not a function|Cannot read prop|undefined is not|Maximum call stack/;

function envFor(s: HostileSetup, address: string): Record<string, string> {
  const common = {
    IGGY_MQTT_IGGY_ADDRESS: address,
    IGGY_MQTT_IGGY_PROTOCOL: s.dialect,
    IGGY_MQTT_IGGY_PASSWORD: "iggy",
    IGGY_MQTT_IGGY_RECONNECT_MAX_MS: "100",
    IGGY_MQTT_IGGY_REQUEST_TIMEOUT_MS: "1000",
    IGGY_MQTT_GATEWAY_LOG_LEVEL: "info",
  };
  if (s.mode === "iggy") return { ...common, IGGY_MQTT_GATEWAY_BACKEND: "iggy" };
  return {
    ...common,
    IGGY_MQTT_FORWARD_ENABLED: "true",
    IGGY_MQTT_FORWARD_LINGER_MS: "5",
    IGGY_MQTT_IGGY_HEARTBEAT_INTERVAL_MS: "1000",
  };
}

/** Every payload stored in the fake Iggy's `sensors/sensor_data`. */
function storedPayloads(store: FakeStore): Set<string> {
  const t = store.topic("sensors", "sensor_data");
  const out = new Set<string>();
  for (const p of t?.partitions ?? []) {
    for (const s of store.payloads("sensors", "sensor_data", p.id)) out.add(s);
  }
  return out;
}

/** The witness: publishes `payload` QoS 1 until PUBACKed or `deadline`, reconnecting. */
class Witness {
  #port: number;
  #client: RawClient | null = null;
  #id = 0;

  constructor(port: number) {
    this.#port = port;
  }

  async publish(payload: string, deadline: number): Promise<boolean> {
    this.#id = this.#id % 65535 + 1;
    let dup = false;
    while (Date.now() < deadline) {
      try {
        this.#client ??= await connectRaw(this.#port, "fuzz-witness");
        const packet = publishPacket("sensors/witness/data", payload, 1, this.#id);
        if (dup) packet[0] |= 0x08;
        await this.#client.send(packet);
        dup = true;
        const wait = Math.min(3000, Math.max(1, deadline - Date.now()));
        const ack = await this.#client.readPacket(wait);
        if (ack === null) throw new Error("no PUBACK");
        if (ack[0] === 0x40 && ((ack[2] << 8) | ack[3]) === this.#id) return true;
      } catch {
        this.close();
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    return false;
  }

  close(): void {
    this.#client?.close();
    this.#client = null;
  }
}

/**
 * Devices publishing QoS 1, one in ten retained (what was PUBACKed is kept), a QoS 1 subscriber
 * with a stored session, and a shared subscription: so that polls, retained records, session
 * records and (Iggy mode) consumer groups all come back through the hostile replies.
 */
async function startLoad(port: number, tag: string) {
  const url = `mqtt://127.0.0.1:${port}`;
  const o = { reconnectPeriod: 200, connectTimeout: 3000, clean: true };
  const acked = new Set<string>();
  let delivered = 0;
  const sub = await mqtt.connectAsync(url, { ...o, clientId: `fz-sub-${tag}`, clean: false });
  sub.on("message", () => delivered++);
  sub.on("error", () => {});
  await sub.subscribeAsync("sensors/+/data", { qos: 1 }).catch(() => {});
  await sub.subscribeAsync("$share/fz/sensors/+/data", { qos: 1 }).catch(() => {});
  const devices = await Promise.all(
    [0, 1].map((d) => mqtt.connectAsync(url, { ...o, clientId: `fz-dev-${tag}-${d}` })),
  );
  for (const d of devices) d.on("error", () => {});
  let seq = 0;
  let running = true;
  const pumping = (async () => {
    while (running) {
      for (const [d, c] of devices.entries()) {
        const payload = `${tag}-d${d}-${seq++}`;
        // Without a callback a refusal is an unhandled error of MQTT.js: kept only when acked.
        const retain = seq % 10 === 0;
        c.publish(`sensors/d${d}/data`, payload, { qos: 1, retain }, (err) => {
          if (!err) acked.add(payload);
        });
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    acked,
    get delivered() {
      return delivered;
    },
    async stop() {
      running = false;
      await pumping;
      await Promise.allSettled([sub, ...devices].map((c) => c.endAsync(true)));
    },
  };
}

/** Waits until `ok()` or `ms` passed; returns whether it became true. */
async function until(ok: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

/**
 * One round: a gateway in `setup` behind a hostile proxy seeded with `seed`, `batches` batches
 * of `batchMs` each at corruption `rate`, each followed by a calm witness publish.
 */
export async function hostileRound(
  setup: HostileSetup,
  seed: number,
  o: { batches: number; batchMs: number; rate: number },
): Promise<HostileRoundResult> {
  const tag = `${setup.mode}-${setup.dialect}-${seed}`;
  const res: HostileRoundResult = {
    batches: 0,
    frames: 0,
    corrupted: {},
    witnessAcks: 0,
    acked: 0,
    delivered: 0,
    findings: [],
  };
  const store = new FakeStore();
  const node = new FakeNode({ dialect: setup.dialect, store });
  const proxy: HostileProxy = startHostileProxy(node.listen(), seed);
  const gw = await startGateway({ env: envFor(setup, proxy.address) });
  const witness = new Witness(gw.port);
  const witnessed: string[] = [];
  const load = await startLoad(gw.port, tag);
  try {
    for (let b = 0; b < o.batches; b++) {
      proxy.rate = o.rate;
      await new Promise((r) => setTimeout(r, o.batchMs));
      proxy.rate = 0;
      res.batches++;
      const payload = `${tag}-witness-${b}`;
      if (await witness.publish(payload, Date.now() + WITNESS_MS)) {
        res.witnessAcks++;
        witnessed.push(payload);
      } else {
        res.findings.push(`${tag}: witness got no PUBACK within ${WITNESS_MS} ms after batch ${b}`);
        break;
      }
    }
  } finally {
    await load.stop();
    witness.close();
    proxy.rate = 0;
    // Iggy mode appends before the PUBACK; forward mode forwards once the proxy is calm.
    const acked = [...witnessed, ...load.acked];
    const wait = setup.mode === "forward" ? DRAIN_MS : 0;
    let lost: string[] = [];
    await until(() => {
      const stored = storedPayloads(store);
      lost = acked.filter((p) => !stored.has(p));
      return lost.length === 0;
    }, wait);
    if (lost.length > 0) {
      const where = setup.mode === "forward" ? ` ${DRAIN_MS} ms after the proxy turned calm` : "";
      res.findings.push(
        `${tag}: ${lost.length} of ${acked.length} PUBACKed messages not in Iggy${where}, e.g. ${
          lost[0]
        }`,
      );
    }
    res.acked = acked.length;
    res.delivered = load.delivered;
    for (const line of gw.logs) {
      if (BUG_LINE.test(line)) res.findings.push(`${tag}: gateway logged ${line.slice(0, 400)}`);
    }
    res.frames = proxy.frames;
    Object.assign(res.corrupted, proxy.corrupted);
    await stopWithin(gw.stop(), `${tag}: gateway stop`, res);
    await proxy.close();
    await node.close();
  }
  return res;
}

/** Awaits `p`, recording a hang when it takes more than 10 s. */
async function stopWithin(p: Promise<void>, what: string, res: HostileRoundResult): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hang = new Promise<"hang">((r) => timer = setTimeout(() => r("hang"), 10_000));
  if (await Promise.race([p, hang]) === "hang") res.findings.push(`${what} hung (over 10 s)`);
  clearTimeout(timer);
}

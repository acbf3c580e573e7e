/**
 * Backlogs paced by the client's socket, with Debian's `mosquitto_sub` as the client: a stored
 * session back to 20,000 messages of 2 KB (and to 200 of 200 KB), a `$replay/earliest/` at QoS 1
 * and at QoS 0, 40,000 retained messages to a reader on `#`, all delivered whole to a client
 * that reads, none evicted; seven clients that take the retained set and never read are
 * evicted, once each, every byte they held of the global budget comes back, and a new
 * subscriber then gets all it is sent.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import {
  connectRaw,
  HAS_MOSQUITTO_CLIENTS,
  startGateway,
  subscribePacket,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";
import { connectMqtt, writeAll } from "../bench/_mqtt.ts";
import { remainingLength } from "../../src/codec/encoder.ts";
import {
  counter,
  FastSubscriber,
  opts,
  parsePublish,
  puback,
  stuckSubscriber,
} from "./_subscribe_helpers.ts";

const enc = new TextEncoder();

/** A QoS 1 PUBLISH (RETAIN when `retain`). */
function publish1(topic: string, payload: Uint8Array, id: number, retain = false): Uint8Array {
  const t = enc.encode(topic);
  const bodyLength = 2 + t.length + 2 + payload.length;
  const rl = remainingLength(bodyLength);
  const out = new Uint8Array(1 + rl.length + bodyLength);
  out[0] = 0x32 | (retain ? 1 : 0);
  out.set(rl, 1);
  let at = 1 + rl.length;
  out[at++] = t.length >> 8;
  out[at++] = t.length & 0xff;
  out.set(t, at);
  at += t.length;
  out[at++] = id >> 8;
  out[at++] = id & 0xff;
  out.set(payload, at);
  return out;
}

/**
 * Publishes `count` QoS 1 messages (`topicOf(i)`, `payload`), `batch` per write, each batch's
 * PUBACKs awaited (every one appended).
 */
async function publishMany(
  port: number,
  count: number,
  topicOf: (i: number) => string,
  payload: Uint8Array,
  o: { batch?: number; retain?: boolean } = {},
): Promise<void> {
  const conn = await connectMqtt(port, `pub-${crypto.randomUUID().slice(0, 8)}`);
  const batch = o.batch ?? 200;
  const acks = new Uint8Array(4 * batch);
  try {
    for (let first = 0; first < count; first += batch) {
      const n = Math.min(batch, count - first);
      const packets = Array.from(
        { length: n },
        (_, k) => publish1(topicOf(first + k), payload, k + 1, o.retain),
      );
      const all = new Uint8Array(packets.reduce((s, p) => s + p.length, 0));
      let at = 0;
      for (const p of packets) {
        all.set(p, at);
        at += p.length;
      }
      await writeAll(conn, all);
      let got = 0;
      while (got < 4 * n) {
        const r = await conn.read(acks.subarray(got, 4 * n));
        assert.ok(r !== null, "publisher closed before its PUBACKs");
        got += r;
      }
    }
  } finally {
    conn.close();
  }
}

/** A running `mosquitto_sub` whose output lines (`-F` format) are counted as they come. */
class MosquittoSub {
  readonly lines: string[] = [];
  readonly #proc: Deno.ChildProcess;
  readonly #done: Promise<void>;
  #stderr = "";

  constructor(port: number, args: string[]) {
    this.#proc = new Deno.Command("mosquitto_sub", {
      args: ["-h", "127.0.0.1", "-p", String(port), ...args],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#done = Promise.all([this.#read(), this.#readErr()]).then(() => {});
  }

  async #read(): Promise<void> {
    const dec = new TextDecoder();
    let rest = "";
    for await (const chunk of this.#proc.stdout) {
      const text = rest + dec.decode(chunk, { stream: true });
      const parts = text.split("\n");
      rest = parts.pop()!;
      for (const p of parts) this.lines.push(p);
    }
  }

  async #readErr(): Promise<void> {
    const dec = new TextDecoder();
    for await (const chunk of this.#proc.stderr) this.#stderr += dec.decode(chunk);
  }

  async waitLines(n: number, timeoutMs: number, what: string): Promise<void> {
    await waitFor(
      () => this.lines.length >= n,
      timeoutMs,
      `${what}: ${this.lines.length} of ${n} (${this.#stderr.trim()})`,
    );
  }

  /** Resolves when it exited by itself; its exit code. */
  async exited(): Promise<number> {
    const { code } = await this.#proc.status;
    await this.#done;
    return code;
  }

  /** SIGINT: mosquitto_sub sends DISCONNECT and exits. */
  async stop(): Promise<void> {
    try {
      this.#proc.kill("SIGINT");
    } catch { /* exited */ }
    await this.#proc.status;
    await this.#done;
  }
}

/** A 2 KB payload, or `n` bytes. */
function payloadOf(n = 2048): Uint8Array {
  return new Uint8Array(n).fill(0x61);
}

/** Subscribes the stored session `id` to `filter` and leaves (mosquitto_sub -E). */
async function storeSession(gw: TestGateway, id: string, filter: string): Promise<void> {
  const s = new MosquittoSub(gw.port, ["-q", "1", "-c", "-i", id, "-t", filter, "-E"]);
  assert.equal(await s.exited(), 0, "mosquitto_sub -E: subscribed");
}

Deno.test({
  name:
    "backlog: mosquitto_sub -q 1 -c back to 20,000 QoS 1 messages of 2 KB on 4 topics gets all 20,000, nobody evicted",
  ignore: !HAS_MOSQUITTO_CLIENTS,
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_GATEWAY_LOG_LEVEL: "warn" } });
    try {
      await storeSession(gw, "s1", "sensors/+/data");
      await publishMany(gw.port, 20_000, (i) => `sensors/${i % 4}/data`, payloadOf());
      const s = new MosquittoSub(gw.port, [
        ...["-q", "1", "-c", "-i", "s1", "-F", "%t", "-t", "sensors/+/data"],
      ]);
      await s.waitLines(20_000, 45_000, "stored session backlog");
      await s.stop();
      assert.equal(s.lines.length, 20_000, "nothing twice");
      assert.equal(counter(gw, "mqtt_slow_consumer_evictions_total"), 0);
      assert.equal(counter(gw, "mqtt_deliveries_dropped_total"), 0);
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "backlog: $replay/earliest/sensors/+/data gets exactly limits.max_replay_messages of 2 KB, at QoS 1 and at QoS 0, then live",
  ignore: !HAS_MOSQUITTO_CLIENTS,
  ...opts,
  async fn() {
    const REPLAY = 10_000; // the default limits.max_replay_messages
    const gw = await startGateway({ env: { IGGY_MQTT_GATEWAY_LOG_LEVEL: "warn" } });
    try {
      assert.equal(gw.config.limits.max_replay_messages, REPLAY);
      await publishMany(gw.port, 12_000, (i) => `sensors/${i % 4}/data`, payloadOf());
      for (const qos of ["1", "0"]) {
        const s = new MosquittoSub(gw.port, [
          ...["-q", qos, "-F", "%t", "-i", `replay-${qos}`],
          ...["-t", "$replay/earliest/sensors/+/data"],
        ]);
        await s.waitLines(REPLAY, 40_000, `replay at QoS ${qos}`);
        // A live message after the replay: what came before it is all the replay gave.
        const marker = `sensors/marker${qos}/data`;
        await publishMany(gw.port, 1, () => marker, payloadOf(10));
        await waitFor(() => s.lines.includes(`$replay/earliest/${marker}`), 10_000, "live after");
        await s.stop();
        assert.equal(s.lines.indexOf(`$replay/earliest/${marker}`), REPLAY, `QoS ${qos}`);
      }
      assert.equal(counter(gw, "mqtt_slow_consumer_evictions_total"), 0);
      assert.equal(
        counter(gw, "mqtt_deliveries_dropped_total"),
        0,
        "QoS 0 replay copies are paced",
      );
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "backlog: a stored session back to 200 messages of 200 KB gets all 200, nobody evicted",
  ignore: !HAS_MOSQUITTO_CLIENTS,
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: {
        IGGY_MQTT_GATEWAY_LOG_LEVEL: "warn",
        IGGY_MQTT_LIMITS_MAX_PACKET_BYTES: String(256 * 1024),
      },
    });
    try {
      await storeSession(gw, "big", "sensors/+/data");
      await publishMany(gw.port, 200, (i) => `sensors/${i % 4}/data`, payloadOf(200 * 1024), {
        batch: 10,
      });
      const s = new MosquittoSub(gw.port, [
        ...["-q", "1", "-c", "-i", "big", "-F", "%t", "-t", "sensors/+/data"],
      ]);
      await s.waitLines(200, 45_000, "200 KB backlog");
      await s.stop();
      assert.equal(s.lines.length, 200);
      assert.equal(counter(gw, "mqtt_slow_consumer_evictions_total"), 0);
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "backlog: 40,000 retained messages reach a reading mosquitto_sub on '#', all flagged retained; seven that never read are evicted once each, the global budget comes back, a new subscriber gets 100/100",
  ignore: !HAS_MOSQUITTO_CLIENTS,
  ...opts,
  async fn() {
    const RETAINED = 40_000;
    const gw = await startGateway({
      env: {
        IGGY_MQTT_GATEWAY_LOG_LEVEL: "warn",
        // The setting: a global cap that seven leaking evictions would fill.
        IGGY_MQTT_LIMITS_MAX_OUTBOUND_QUEUE_BYTES: String(4 * 1024 * 1024),
        IGGY_MQTT_LIMITS_MAX_OUTBOUND_QUEUE_BYTES_PER_CLIENT: String(1024 * 1024),
        IGGY_MQTT_LIMITS_SLOW_CONSUMER_TIMEOUT_MS: "1000",
      },
    });
    const stuck: Deno.TcpConn[] = [];
    try {
      // 300-byte payloads: ~13 MB, more than loopback socket buffers take from a client that
      // does not read. A retained PUBLISH waits for the one before it on its connection: 16
      // publishers.
      const PUBLISHERS = 16;
      const each = RETAINED / PUBLISHERS;
      await Promise.all(
        Array.from({ length: PUBLISHERS }, (_, k) =>
          publishMany(
            gw.port,
            each,
            (i) => `sensors/${k * each + i}/data`,
            payloadOf(300),
            {
              batch: 500,
              retain: true,
            },
          )),
      );
      const s = new MosquittoSub(gw.port, ["-q", "1", "-F", "%r", "-t", "#", "-i", "reader"]);
      await s.waitLines(RETAINED, 45_000, "retained set");
      await s.stop();
      assert.equal(s.lines.length, RETAINED);
      assert.ok(s.lines.every((l) => l === "1"), "every copy flagged retained");
      assert.equal(counter(gw, "mqtt_slow_consumer_evictions_total"), 0, "the reader stays");

      for (let i = 0; i < 7; i++) stuck.push(await stuckSubscriber(gw.port, `stuck-${i}`, "#"));
      await waitFor(
        () => counter(gw, "mqtt_slow_consumer_evictions_total") === 7,
        20_000,
        "seven evicted",
      );
      await waitFor(
        () => counter(gw, "mqtt_outbound_queue_bytes") === 0, // no client connected now
        5000,
        "outbound bytes back to 0",
      );
      const fresh = await FastSubscriber.start(gw.port, "fresh", "building/x/room/1/t");
      const pub = await connectMqtt(gw.port, "pub-qos0");
      const qos0 = enc.encode("x".repeat(100));
      for (let i = 0; i < 100; i++) {
        const t = enc.encode("building/x/room/1/t");
        const body = new Uint8Array([t.length >> 8, t.length & 0xff, ...t, ...qos0]);
        await writeAll(pub, new Uint8Array([0x30, ...remainingLength(body.length), ...body]));
      }
      await waitFor(() => fresh.received === 100, 10_000, `100/100 (${fresh.received})`);
      pub.close();
      fresh.close();
      assert.equal(counter(gw, "mqtt_slow_consumer_evictions_total"), 7, "counted once each");
    } finally {
      for (const c of stuck) {
        try {
          c.close();
        } catch { /* closed by the gateway */ }
      }
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "backlog: a retained set many times the client's cap comes after the SUBACK, whole, at the pace the client reads",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: {
        IGGY_MQTT_GATEWAY_LOG_LEVEL: "warn",
        IGGY_MQTT_LIMITS_MAX_OUTBOUND_QUEUE_BYTES_PER_CLIENT: String(64 * 1024),
      },
    });
    try {
      await publishMany(gw.port, 500, (i) => `sensors/${i}/data`, payloadOf(1024), {
        retain: true,
      });
      const c = await connectRaw(gw.port, "late");
      await c.send(subscribePacket(7, [["sensors/#", 1]]));
      const first = await c.readPacket();
      assert.ok(first !== null && first[0] === 0x90, `SUBACK first, got ${first?.[0]}`);
      const topics = new Set<string>();
      while (topics.size < 500) {
        const p = await c.readPacket(5000);
        assert.ok(p !== null, `closed after ${topics.size} retained copies`);
        const r = parsePublish(p);
        topics.add(r.topic);
        await c.send(puback(r.packetId));
      }
      assert.equal(counter(gw, "mqtt_slow_consumer_evictions_total"), 0);
      c.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "backlog: MQTT.js over WebSocket, a stored session back to 20,000 QoS 1 messages of 2 KB (MQTT 5) and a QoS 0 replay get them all",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: { IGGY_MQTT_GATEWAY_LOG_LEVEL: "warn", IGGY_MQTT_LISTENERS_WS: "127.0.0.1:0" },
    });
    const url = `ws://127.0.0.1:${gw.wsPort}/mqtt`;
    const o = {
      reconnectPeriod: 0,
      protocolVersion: 5 as const,
      clientId: "ws-s1",
      clean: false,
      properties: { sessionExpiryInterval: 600 },
    };
    try {
      const first = await mqtt.connectAsync(url, o);
      await first.subscribeAsync("sensors/+/data", { qos: 1 });
      await first.endAsync();
      await publishMany(gw.port, 20_000, (i) => `sensors/${i % 4}/data`, payloadOf());
      let got = 0;
      // The handler is on before the CONNECT: the backlog may come right after the CONNACK.
      const back = mqtt.connect(url, { ...o, manualConnect: true });
      back.on("message", () => got++);
      back.connect();
      await waitFor(() => got === 20_000, 45_000, "stored session over ws");
      await back.endAsync();
      let replayed = 0;
      const replay = await mqtt.connectAsync(url, { reconnectPeriod: 0 });
      replay.on("message", () => replayed++);
      await replay.subscribeAsync("$replay/earliest/sensors/+/data", { qos: 0 });
      await waitFor(() => replayed === 10_000, 45_000, "replay over ws");
      await replay.endAsync();
      assert.equal(counter(gw, "mqtt_slow_consumer_evictions_total"), 0);
      assert.equal(counter(gw, "mqtt_deliveries_dropped_total"), 0);
    } finally {
      await gw.stop();
    }
  },
});

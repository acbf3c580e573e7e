/**
 * MQTT 5 on the way out, end to end with real clients (MQTT.js `protocolVersion: 5` and 4):
 * a v5 subscriber gets the stored properties back, a 3.1.1 subscriber the same message without
 * them; subscription identifiers, No Local, Receive Maximum, Maximum Packet Size and message
 * expiry each with a test.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import mqtt from "mqtt";
import {
  HAS_MOSQUITTO_CLIENTS,
  hasCommand,
  run,
  startGateway,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";
import { mqttjsPing, tripleOf } from "./_subscribe_helpers.ts";
import type { PartitionAddress } from "../../src/log/port.ts";

const opts = {};

const PAHO_SUBSCRIBER = new URL("../clients/paho5_subscriber.py", import.meta.url).pathname;
const HAS_PAHO = hasCommand("python3") &&
  new Deno.Command("python3", { args: ["-c", "import paho.mqtt"], stderr: "null" }).outputSync()
    .success;
if (!HAS_PAHO) {
  console.warn("WARNING: python3 with paho-mqtt not found; the paho-mqtt v5 tests are SKIPPED.");
}

// deno-lint-ignore no-explicit-any
type Packet = any;

interface Received {
  readonly topic: string;
  readonly payload: string;
  readonly packet: Packet;
}

/** A connected MQTT.js client that records what it receives. */
async function client(gw: TestGateway, version: 4 | 5, o: Record<string, unknown> = {}) {
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
    protocolVersion: version,
    reconnectPeriod: 0,
    ...o,
  });
  const got: Received[] = [];
  c.on("message", (topic, payload, packet) => {
    got.push({ topic, payload: payload.toString(), packet });
  });
  return { c, got };
}

Deno.test({
  name:
    "MQTT 5 round trip: a v5 subscriber gets user properties and the other properties back; a 3.1.1 subscriber gets the same message without them",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const v5 = await client(gw, 5);
      const v3 = await client(gw, 4);
      await v5.c.subscribeAsync("sensors/s1/data", { qos: 1 });
      await v3.c.subscribeAsync("sensors/s1/data", { qos: 1 });
      const pub = await client(gw, 5);
      await pub.c.publishAsync("sensors/s1/data", "21.5", {
        qos: 1,
        properties: {
          payloadFormatIndicator: true,
          messageExpiryInterval: 3600,
          contentType: "text/plain",
          responseTopic: "replies/s1",
          correlationData: Buffer.from([1, 2, 3]),
          userProperties: { site: "north", tag: ["a", "b"] },
        },
      });
      await waitFor(() => v5.got.length === 1 && v3.got.length === 1, 5000, "both copies");
      const p = v5.got[0].packet.properties;
      assert.deepEqual({ ...p.userProperties }, { site: "north", tag: ["a", "b"] });
      assert.equal(p.contentType, "text/plain");
      assert.equal(p.responseTopic, "replies/s1");
      assert.deepEqual([...p.correlationData], [1, 2, 3]);
      assert.equal(p.payloadFormatIndicator, true);
      assert.ok(p.messageExpiryInterval <= 3600 && p.messageExpiryInterval >= 3598);
      assert.equal(v5.got[0].payload, "21.5");
      assert.equal(v3.got[0].payload, "21.5");
      assert.equal(v3.got[0].packet.properties, undefined);
      // A 3.1.1 publish reaches the v5 subscriber with no properties.
      await v3.c.publishAsync("sensors/s1/data", "from-3.1.1", { qos: 1 });
      await waitFor(() => v5.got.length === 2, 5000, "the 3.1.1 message");
      assert.equal(v5.got[1].payload, "from-3.1.1");
      assert.equal(v5.got[1].packet.properties, undefined);
      for (const k of [v5, v3, pub]) await k.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 subscription identifiers come back on every delivery; No Local keeps a client's own publishes from it",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const a = await client(gw, 5);
      await a.c.subscribeAsync("sensors/id/data", {
        qos: 1,
        properties: { subscriptionIdentifier: 42 },
      });
      await a.c.subscribeAsync("sensors/own/data", { qos: 1, nl: true });
      const b = await client(gw, 5);
      await b.c.publishAsync("sensors/id/data", "x", { qos: 1 });
      await waitFor(() => a.got.length === 1, 5000, "delivery");
      assert.equal(a.got[0].packet.properties.subscriptionIdentifier, 42);
      await a.c.publishAsync("sensors/own/data", "mine", { qos: 1 });
      await b.c.publishAsync("sensors/own/data", "theirs", { qos: 1 });
      await waitFor(() => a.got.length === 2, 5000, "the other client's message");
      assert.equal(a.got[1].payload, "theirs"); // its own "mine", published before, never came
      await mqttjsPing(a.c); // barrier: nothing else was on its way to it
      assert.equal(a.got.length, 2);
      await a.c.endAsync();
      await b.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 Receive Maximum (paho-mqtt, manual acks) bounds the QoS 1 deliveries in flight to the client; its PUBACKs release the rest",
  ignore: !HAS_PAHO,
  ...opts,
  async fn() {
    const gw = await startGateway();
    const relay = PingRelay.start(gw.port);
    const sub = pahoSubscriber(relay.port, "rm-sub", "sensors/rm/data", 2);
    const rm = tripleOf("sensors", "sensor_data", "sensor_rm");
    const unsettled = () => gw.view.readers().find((r) => sameTriple(r.triple, rm))?.unsettled ?? 0;
    try {
      await sub.waitFor((l) => l.startsWith("suback"));
      const pub = await client(gw, 5);
      for (let i = 0; i < 5; i++) await pub.c.publishAsync("sensors/rm/data", `m${i}`, { qos: 1 });
      await sub.waitFor(() => sub.messages().length === 2);
      // Barrier: all five were routed to the client (five unsettled copies), then a PINGREQ
      // in its stream: what the gateway sent it before the PINGRESP is all it sent.
      await waitFor(() => unsettled() === 5, 5000, "five copies routed to the paho client");
      assert.equal(await relay.barrier(), 2, "no third delivery while two are unacknowledged");
      assert.equal(sub.messages().length, 2, "no third delivery while two are unacknowledged");
      await sub.send("ack");
      await sub.waitFor(() => sub.messages().length === 4);
      await waitFor(() => unsettled() === 3, 5000, "the two PUBACKs settled");
      assert.equal(await relay.barrier(), 4, "two more deliveries for two PUBACKs");
      assert.equal(sub.messages().length, 4);
      await sub.send("ack");
      await sub.waitFor(() => sub.messages().length === 5);
      assert.deepEqual(sub.messages().map((l) => l.split(" ")[1]), ["m0", "m1", "m2", "m3", "m4"]);
      await pub.c.endAsync();
    } finally {
      await sub.stop();
      relay.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 Maximum Packet Size: a delivery larger than the client's maximum is not sent and is counted; smaller ones go",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const sub = await client(gw, 5, { properties: { maximumPacketSize: 128 } });
      await sub.c.subscribeAsync("sensors/mps/data", { qos: 1 });
      await sub.c.subscribeAsync("sensors/mps0/data", { qos: 0 });
      const pub = await client(gw, 5);
      await pub.c.publishAsync("sensors/mps/data", "x".repeat(200), { qos: 1 });
      await pub.c.publishAsync("sensors/mps0/data", "y".repeat(200), { qos: 0 });
      await pub.c.publishAsync("sensors/mps/data", "small", { qos: 1 });
      await waitFor(() => sub.got.length === 1, 5000, "the small message");
      assert.equal(sub.got[0].payload, "small");
      assert.equal(gw.view.metrics.droppedTooLarge.get({}), 2);
      await sub.c.endAsync();
      await pub.c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 message expiry: a message whose interval passed before a stored session got it again after a restart is not delivered; one without expiry is",
  ignore: !HAS_PAHO,
  ...opts,
  async fn() {
    const dir = await Deno.makeTempDir();
    const env = { IGGY_MQTT_EMBEDDED_PATH: `${dir}/expiry.db` };
    let gw = await startGateway({ env });
    const sub = pahoSubscriber(gw.port, "expiry-sub", "sensors/exp/data", 10, 3600);
    try {
      await sub.waitFor((l) => l.startsWith("suback"));
      const pub = await client(gw, 5);
      // A first message, acknowledged: the session's position moves past it.
      await pub.c.publishAsync("sensors/exp/data", "settled", { qos: 1 });
      await sub.waitFor(() => sub.messages().length === 1);
      await sub.send("ack");
      const committed = () => gw.view.readers().some((r) => r.committed >= 0);
      await waitFor(committed, 5000, "settled");
      await pub.c.publishAsync("sensors/exp/data", "short-lived", {
        qos: 1,
        properties: { messageExpiryInterval: 1 },
      });
      await pub.c.publishAsync("sensors/exp/data", "lasting", { qos: 1 });
      await sub.waitFor(() => sub.messages().length === 3);
      // Delivered live with the time left (1 s), then left unacknowledged.
      assert.deepEqual(sub.messages().slice(1), ["msg short-lived 1", "msg lasting -"]);
      // The gateway stops while they are unacknowledged: the stored session's position stays
      // before them.
      pub.c.end(true);
      await gw.stop();
      await sub.stop();
      // Real time: the 1 s expiry interval must pass (counted from the append, before the stop).
      await new Promise((r) => setTimeout(r, 1100));
      gw = await startGateway({ env });
      // The session's backlog may come in the CONNACK's read: listen before it.
      const again = {
        c: mqtt.connect(`mqtt://127.0.0.1:${gw.port}`, {
          protocolVersion: 5,
          reconnectPeriod: 0,
          clientId: "expiry-sub",
          clean: false,
          properties: { sessionExpiryInterval: 3600 },
        }),
        got: [] as string[],
      };
      again.c.on("message", (_t, payload) => again.got.push(payload.toString()));
      await waitFor(() => again.got.length >= 1, 5000, "redelivery after restart");
      await mqttjsPing(again.c); // barrier: nothing else was on its way to it
      assert.deepEqual(again.got, ["lasting"]);
      assert.equal(gw.view.metrics.expired.get({}), 1);
      await again.c.endAsync();
    } finally {
      await sub.stop();
      await gw.stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

const sameTriple = (a: PartitionAddress, b: PartitionAddress) =>
  a.stream === b.stream && a.topic === b.topic && a.partition === b.partition;

/** Splits whole MQTT packets off the front of `buf`; returns them and the incomplete rest. */
function splitPackets(buf: Uint8Array): { packets: Uint8Array[]; rest: Uint8Array } {
  const packets: Uint8Array[] = [];
  let at = 0;
  for (;;) {
    let len = 0;
    let mult = 1;
    let i = at + 1;
    let complete = false;
    while (i < buf.length && i <= at + 4) {
      len += (buf[i] & 0x7f) * mult;
      mult *= 128;
      if ((buf[i++] & 0x80) === 0) {
        complete = true;
        break;
      }
    }
    if (!complete || i + len > buf.length) break;
    packets.push(buf.slice(at, i + len));
    at = i + len;
  }
  return { packets, rest: buf.slice(at) };
}

async function writeAll(conn: Deno.Conn, b: Uint8Array): Promise<void> {
  let off = 0;
  while (off < b.length) off += await conn.write(b.subarray(off));
}

/**
 * A TCP relay between one client the test cannot drive (paho-mqtt in a child process) and the
 * gateway. It passes whole packets both ways and counts the PUBLISHes the gateway sends;
 * {@link barrier} slips a PINGREQ in between the client's packets and resolves at its PINGRESP
 * (kept from the client) with that count: the gateway writes a connection's packets in order,
 * so nothing it sent the client before the PINGRESP is left out.
 */
class PingRelay {
  readonly port: number;
  #listener: Deno.Listener;
  #conns: Deno.Conn[] = [];
  #upstream: Promise<Deno.Conn>;
  /** Writes to the gateway, one after the other: only whole packets, so a PINGREQ fits between. */
  #toGateway: Promise<void> = Promise.resolve();
  #publishes = 0;
  #waiting: ((publishes: number) => void)[] = [];
  #closed = false;

  private constructor(listener: Deno.Listener, gatewayPort: number) {
    this.#listener = listener;
    this.port = (listener.addr as Deno.NetAddr).port;
    this.#upstream = (async () => {
      const client = await listener.accept();
      const gateway = await Deno.connect({ hostname: "127.0.0.1", port: gatewayPort });
      this.#conns.push(client, gateway);
      this.#pump(client, (p) => {
        this.#toGateway = this.#toGateway.then(() => writeAll(gateway, p));
        return this.#toGateway;
      });
      this.#pump(gateway, async (p) => {
        if (p[0] >> 4 === 3) this.#publishes++;
        if (p[0] === 0xd0 && this.#waiting.length > 0) {
          return this.#waiting.shift()!(this.#publishes);
        }
        await writeAll(client, p);
      });
      return gateway;
    })();
  }

  static start(gatewayPort: number): PingRelay {
    return new PingRelay(Deno.listen({ hostname: "127.0.0.1", port: 0 }), gatewayPort);
  }

  /** PINGREQ barrier: the number of PUBLISHes the gateway sent the client before its PINGRESP. */
  async barrier(timeoutMs = 5000): Promise<number> {
    const gateway = await this.#upstream;
    let count: number | undefined;
    this.#waiting.push((n) => count = n);
    this.#toGateway = this.#toGateway.then(() => writeAll(gateway, new Uint8Array([0xc0, 0])));
    await waitFor(() => count !== undefined, timeoutMs, "the PINGRESP through the relay");
    return count!;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const c of [this.#listener, ...this.#conns]) {
      try {
        c.close();
      } catch { /* closed */ }
    }
  }

  async #pump(from: Deno.Conn, onPacket: (p: Uint8Array) => Promise<void> | void): Promise<void> {
    const chunk = new Uint8Array(65536);
    let buf: Uint8Array = new Uint8Array(0);
    try {
      for (;;) {
        const n = await from.read(chunk);
        if (n === null) break;
        const joined = new Uint8Array(buf.length + n);
        joined.set(buf);
        joined.set(chunk.subarray(0, n), buf.length);
        const { packets, rest } = splitPackets(joined);
        buf = rest;
        for (const p of packets) await onPacket(p);
      }
    } catch { /* closed */ }
    this.close();
  }
}

/** tests/clients/paho5_subscriber.py as a child: its output lines, commands on its stdin. */
function pahoSubscriber(
  port: number,
  clientId: string,
  topic: string,
  receiveMax: number,
  sessionExpiryS?: number,
) {
  const expiry = sessionExpiryS === undefined ? [] : [String(sessionExpiryS)];
  const child = new Deno.Command("python3", {
    args: [PAHO_SUBSCRIBER, String(port), clientId, topic, String(receiveMax), ...expiry],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines: string[] = [];
  const stdin = child.stdin.getWriter();
  (async () => {
    let rest = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      rest += chunk;
      const parts = rest.split("\n");
      rest = parts.pop()!;
      lines.push(...parts);
    }
  })();
  let stopped = false;
  return {
    lines,
    messages: () => lines.filter((l) => l.startsWith("msg ")),
    waitFor: (f: (line: string) => boolean) =>
      waitFor(() => lines.some(f), 5000, `paho subscriber (${lines.join(" | ")})`),
    send: (command: string) => stdin.write(new TextEncoder().encode(command + "\n")),
    async stop() {
      if (stopped) return;
      stopped = true;
      await stdin.write(new TextEncoder().encode("quit\n")).catch(() => {});
      await stdin.close().catch(() => {});
      await child.status;
    },
  };
}

Deno.test({
  name:
    "mosquitto_pub -V 5 user properties reach mosquitto_sub -V 5 with them, mosquitto_sub -V 311 without them, and the log as headers",
  ignore: !HAS_MOSQUITTO_CLIENTS,
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const at = ["-h", "127.0.0.1", "-p", String(gw.port), "-q", "1", "-t", "sensors/m/data"];
      const sub5 = run("mosquitto_sub", [
        ...at,
        "-V",
        "5",
        "-i",
        "s5",
        "-F",
        "%t %p|%P",
        "-C",
        "1",
        "-W",
        "10",
      ]);
      const sub3 = run("mosquitto_sub", [
        ...at,
        "-V",
        "311",
        "-i",
        "s3",
        "-F",
        "%t %p|%P",
        "-C",
        "1",
        "-W",
        "10",
      ]);
      await waitFor(
        () => (gw.view.subscriptions("sensors/m/data")?.size ?? 0) === 2,
        5000,
        "both subscriptions",
      );
      const pub = await run("mosquitto_pub", [
        ...at,
        ...["-V", "5", "-m", "hello"],
        ...["-D", "publish", "user-property", "site", "north"],
        ...["-D", "publish", "user-property", "site", "south"],
      ]);
      assert.equal(pub.code, 0, pub.stderr);
      const [r5, r3] = await Promise.all([sub5, sub3]);
      assert.equal(r5.stdout, "sensors/m/data hello|site:north site:south\n");
      assert.equal(r3.stdout, "sensors/m/data hello|\n");
      const stored = [];
      for (let p = 0; p < 3; p++) {
        const a = { stream: "sensors", topic: "sensor_data", partition: p };
        stored.push(...await gw.view.log.poll(a, 0, 10));
      }
      assert.equal(stored.length, 1);
      assert.equal(stored[0].headers.get("mqtt5.user.0.site"), "north");
      assert.equal(stored[0].headers.get("mqtt5.user.1.site"), "south");
    } finally {
      await gw.stop();
    }
  },
});

/**
 * Packets as large as real devices send, with the default config (`limits.max_packet_bytes`
 * 1 MiB): a 100 KB publish over MQTT 3.1.1 and MQTT 5, from MQTT.js and from mosquitto_pub, is
 * PUBACKed and delivered whole, and so is one just under 1 MiB; one byte over is refused. The
 * bounds that scale with it leave room: a burst of five of the largest publishes reaches QoS 0
 * and QoS 1 subscribers and is retained; a backlog of forty reaches a replay and a stored session.
 *
 * The bound on all partly received packets together (`limits.max_partial_packet_bytes_total`):
 * slow senders that each stop part-way through a 500 KB PUBLISH fill it; the read that would
 * pass it closes its connection (MQTT 5: DISCONNECT 0x89), counted and logged once at warn,
 * while the senders within the bound, and everyone else, go on; a stalled sender that leaves
 * gives its bytes back. An idle connection, and one that announced a 1 MiB packet, holds only
 * the bytes that arrived (RSS).
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import mqtt from "mqtt";
import {
  connectPacket,
  connectRaw,
  HAS_MOSQUITTO_CLIENTS,
  publishPacket,
  RawClient,
  run,
  startGateway,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";

const opts = {};
const MIB = 1024 * 1024;

/** `n` bytes, byte i = (i * 31 + seed) & 0xff: a corrupted or cut copy cannot compare equal. */
function payloadOf(n: number, seed = 0): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

/** A value of the gateway's Prometheus exposition. */
function metric(gw: TestGateway, name: string): number {
  const line = gw.view.prometheus().split("\n")
    .find((l) => l.startsWith(name + " "));
  return line === undefined ? NaN : Number(line.slice(name.length + 1));
}

for (const version of [4, 5] as const) {
  Deno.test({
    name: `default config, MQTT ${
      version === 4 ? "3.1.1" : "5"
    }: MQTT.js publishes 100 KB and 1 MiB - 64 B at QoS 1; both are PUBACKed and delivered whole to a QoS 1 subscriber`,
    ...opts,
    async fn() {
      const gw = await startGateway();
      const url = `mqtt://127.0.0.1:${gw.port}`;
      const o = { protocolVersion: version, reconnectPeriod: 0 };
      const sub = await mqtt.connectAsync(url, { ...o, clientId: `big-sub-${version}` });
      const pub = await mqtt.connectAsync(url, { ...o, clientId: `big-pub-${version}` });
      try {
        if (version === 5) {
          const connack = (pub as unknown as { connackPacket: mqtt.IConnackPacket }).connackPacket;
          assert.equal(connack.properties?.maximumPacketSize, MIB);
        }
        const got: Buffer[] = [];
        sub.on("message", (_t, p) => got.push(p));
        await sub.subscribeAsync("sensors/big/data", { qos: 1 });
        const small = payloadOf(100_000, version);
        // The largest payload whose PUBLISH (topic, packet id) still fits 1 MiB, less a margin.
        const large = payloadOf(MIB - 64, version + 1);
        // MQTT.js resolves a QoS 1 publish when its PUBACK arrives.
        await pub.publishAsync("sensors/big/data", small, { qos: 1 });
        await pub.publishAsync("sensors/big/data", large, { qos: 1 });
        assert.equal(gw.view.metrics.publishes.get({ outcome: "acked" }), 2);
        await waitFor(() => got.length >= 2, 10_000, "both large messages delivered");
        assert.ok(got[0].equals(small), "100 KB delivered byte for byte");
        assert.ok(got[1].equals(large), "1 MiB - 64 B delivered byte for byte");
        assert.equal(metric(gw, "mqtt_partial_packet_bytes"), 0);
      } finally {
        await pub.endAsync();
        await sub.endAsync();
        await gw.stop();
      }
    },
  });
}

Deno.test({
  name:
    "default config: five of the largest QoS 1 publishes (payload max_packet_bytes - topic - 4) in one burst reach a QoS 1 and a QoS 0 subscriber, none dropped or evicted; retained, the last reaches a new subscriber",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const url = `mqtt://127.0.0.1:${gw.port}`;
    const clients: mqtt.MqttClient[] = [];
    const connect = async (clientId: string) => {
      const c = await mqtt.connectAsync(url, { clientId, reconnectPeriod: 0 });
      clients.push(c);
      return c;
    };
    try {
      const topic = "sensors/big/data";
      const largest = MIB - topic.length - 4; // topic length, topic, packet id
      const got: Record<number, Buffer[]> = { 0: [], 1: [] };
      for (const qos of [0, 1] as const) {
        const sub = await connect(`sub-q${qos}`);
        sub.on("message", (_t, p) => got[qos].push(p));
        await sub.subscribeAsync(topic, { qos });
      }
      const pub = await connect("pub");
      const sent = [0, 1, 2, 3, 4].map((i) => payloadOf(largest, i));
      await Promise.all(
        sent.map((p, i) => pub.publishAsync(topic, p, { qos: 1, retain: i === 4 })),
      );
      await waitFor(() => got[0].length + got[1].length === 10, 20_000, "ten deliveries");
      for (const qos of [0, 1]) {
        assert.ok(got[qos].every((p, i) => p.equals(sent[i])), `QoS ${qos} in order, whole`);
      }
      assert.equal(gw.view.metrics.droppedQos0.get(), 0);
      assert.equal(gw.view.metrics.evictions.get(), 0);
      assert.equal(gw.view.metrics.retainedRefused.get(), 0);
      const late = await connect("late");
      const retained = new Promise<Buffer>((resolve) => late.on("message", (_t, p) => resolve(p)));
      await late.subscribeAsync(topic, { qos: 1 });
      assert.ok((await retained).equals(sent[4]), "the retained largest message, whole");
    } finally {
      for (const c of clients) await c.endAsync();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "default config: a live burst of 24 of the largest QoS 1 publishes (three times the 8 MiB per-client cap) reaches a QoS 1 subscriber that reads, whole and in order: the reader waits for it, no one is evicted",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const url = `mqtt://127.0.0.1:${gw.port}`;
    const clients: mqtt.MqttClient[] = [];
    const connect = async (clientId: string) => {
      const c = await mqtt.connectAsync(url, { clientId, reconnectPeriod: 0 });
      clients.push(c);
      return c;
    };
    try {
      const topic = "sensors/big/data";
      const largest = MIB - topic.length - 4;
      const got: Buffer[] = [];
      const sub = await connect("burst-sub");
      sub.on("message", (_t, p) => got.push(p));
      await sub.subscribeAsync(topic, { qos: 1 });
      const pub = await connect("burst-pub");
      const sent = Array.from({ length: 24 }, (_, i) => payloadOf(largest, i));
      // One burst: every PUBLISH is on the wire before the first PUBACK comes back.
      await Promise.all(sent.map((p) => pub.publishAsync(topic, p, { qos: 1 })));
      await waitFor(() => got.length === 24 || !sub.connected, 30_000, "24 deliveries");
      assert.equal(gw.view.metrics.evictions.get(), 0, "the subscriber that reads is not evicted");
      assert.equal(got.length, 24);
      assert.ok(got.every((p, i) => p.equals(sent[i])), "in order, whole");
    } finally {
      for (const c of clients) await c.endAsync();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "default config: a backlog of 40 messages of 1 MiB reaches a $replay subscription and a returning stored session whole, in cap-sized steps, no one evicted",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const url = `mqtt://127.0.0.1:${gw.port}`;
    const clients: mqtt.MqttClient[] = [];
    const connect = async (clientId: string) => {
      const c = await mqtt.connectAsync(url, { clientId, reconnectPeriod: 0 });
      clients.push(c);
      return c;
    };
    try {
      const away = await mqtt.connectAsync(url, { clientId: "stored", clean: false });
      await away.subscribeAsync("sensors/big/data", { qos: 1 });
      await away.endAsync();
      const pub = await connect("pub");
      const sent = Array.from({ length: 40 }, (_, i) => payloadOf(MIB - 64, i));
      for (const p of sent) await pub.publishAsync("sensors/big/data", p, { qos: 1 });
      const replayed: Buffer[] = [];
      const replay = await connect("replay");
      replay.on("message", (_t, p) => replayed.push(p));
      await replay.subscribeAsync("$replay/earliest/sensors/big/data", { qos: 1 });
      const resumed: Buffer[] = [];
      const back = mqtt.connect(url, { clientId: "stored", clean: false, reconnectPeriod: 0 });
      back.on("message", (_t, p) => resumed.push(p));
      clients.push(back);
      await waitFor(() => replayed.length === 40 && resumed.length === 40, 30_000, "both backlogs")
        .catch((err) => {
          throw new Error(`${err.message}: ${replayed.length} replayed, ${resumed.length} resumed`);
        });
      assert.ok(replayed.every((p, i) => p.equals(sent[i])), "replay in order, whole");
      assert.ok(resumed.every((p, i) => p.equals(sent[i])), "stored session in order, whole");
      assert.equal(gw.view.metrics.evictions.get(), 0);
    } finally {
      for (const c of clients) await c.endAsync();
      await gw.stop();
    }
  },
});

for (const version of ["311", "5"]) {
  Deno.test({
    name:
      `default config: mosquitto_pub -V ${version} of 100 KB at QoS 1 exits 0 and mosquitto_sub -V ${version} receives it whole`,
    ignore: !HAS_MOSQUITTO_CLIENTS,
    ...opts,
    async fn() {
      const gw = await startGateway();
      try {
        const file = `${gw.dir}/100k.txt`;
        // Printable bytes, no newline: mosquitto_sub -N prints the payload as it came.
        const text = "0123456789abcdefghijklmnopqrstuvwxyz".repeat(2778).slice(0, 100_000);
        await Deno.writeTextFile(file, text);
        const at = ["-h", "127.0.0.1", "-p", String(gw.port), "-q", "1", "-V", version];
        const sub = run("mosquitto_sub", [...at, "-t", "sensors/m/data", "-C", "1", "-N"], {
          timeoutMs: 15_000,
        });
        await waitFor(
          () => (gw.view.exactSubscriptions("sensors/m/data") !== undefined),
          10_000,
          "mosquitto_sub's subscription",
        );
        const pub = await run("mosquitto_pub", [...at, "-t", "sensors/m/data", "-f", file]);
        assert.equal(pub.code, 0, pub.stderr);
        const got = await sub;
        assert.equal(got.code, 0, got.stderr);
        assert.equal(got.stdout.length, 100_000);
        assert.ok(got.stdout === text, "100 KB delivered byte for byte");
      } finally {
        await gw.stop();
      }
    },
  });
}

Deno.test({
  name:
    "default config: a PUBLISH of max_packet_bytes + 1 is refused at its fixed header, nothing of it held (MQTT 5's DISCONNECT 0x95: mqtt5_disconnect_test)",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const raw = await connectRaw(gw.port, "over-311");
      // Fixed header only: 1 MiB + 1 announced, nothing of the body sent.
      await raw.send([0x32, 0x81, 0x80, 0x40]);
      assert.ok(await raw.closedByPeer(), "closed at the header");
      raw.close();
      assert.equal(gw.view.metrics.protocolErrors.get({ rule: "MQTT-2.2.3" }), 1);
      assert.equal(metric(gw, "mqtt_partial_packet_bytes"), 0);
      // One byte less is held, waiting for its body.
      const fits = await connectRaw(gw.port, "fits-311");
      await fits.send([0x32, 0x80, 0x80, 0x40, 0]);
      await waitFor(() => metric(gw, "mqtt_partial_packet_bytes") === 5, 5000, "5 bytes held");
      // Barrier: the header was handled (its bytes are held), and a refusal would have closed
      // the connection in that same step, taking it out of the registry.
      assert.equal(gw.view.connected, 1, "the connection holding a packet that fits stays");
      fits.close();
    } finally {
      await gw.stop();
    }
  },
});

/** A 3.1.1 CONNECT with a will of `willBytes` and a password of `passwordBytes`. */
function bigConnect(willBytes: number, passwordBytes: number): Uint8Array {
  const str = (b: Uint8Array) => [b.length >> 8, b.length & 0xff, ...b];
  const enc = (t: string) => new TextEncoder().encode(t);
  const body = [
    ...[0, 4, 77, 81, 84, 84, 4, 0xce, 0, 60], // "MQTT" 4; user, password, will QoS 1, clean
    ...str(enc("big-connect")),
    ...str(enc("sensors/will/data")),
    ...str(payloadOf(willBytes)),
    ...str(enc("nobody")),
    ...str(payloadOf(passwordBytes, 7)),
  ];
  const len: number[] = [];
  for (let n = body.length; n > 0 || len.length === 0; n >>= 7) len.push((n & 0x7f) | 0x80);
  len[len.length - 1] &= 0x7f;
  return new Uint8Array([0x10, ...len, ...body]);
}

Deno.test({
  name:
    "default config: a first packet over limits.max_connect_packet_bytes (64 KiB) is refused at its fixed header, nothing of it held; a CONNECT of 85 KB (a 20 KB will, a 65 KB password) is read once the key is raised",
  ...opts,
  async fn() {
    const big = bigConnect(20_000, 65_000);
    assert.ok(big.length > 80_000);
    const gw = await startGateway();
    try {
      // Unauthenticated: a CONNECT announced at 1 MiB - 1 (under max_packet_bytes) is refused.
      const raw = await RawClient.connect(gw.port);
      await raw.send([0x10, 0xff, 0xff, 0x3f]);
      assert.ok(await raw.closedByPeer(), "closed at the header");
      raw.close();
      assert.equal(gw.view.metrics.protocolErrors.get({ rule: "MQTT-2.2.3" }), 1);
      assert.equal(metric(gw, "mqtt_partial_packet_bytes"), 0);
      assert.ok(gw.logs.some((l) => l.includes("exceeds max_connect_packet_bytes 65536")));
      const over = await RawClient.connect(gw.port);
      await over.send(big.subarray(0, 5));
      assert.ok(await over.closedByPeer(), "85 KB: closed at the header by default");
      over.close();
      // Logged in, the same size is a packet like any other: held while it arrives.
      const fits = await connectRaw(gw.port, "after-connect");
      await fits.send([0x32, 0xff, 0xff, 0x3f, 0]);
      await waitFor(() => metric(gw, "mqtt_partial_packet_bytes") === 5, 5000, "5 bytes held");
      fits.close();
    } finally {
      await gw.stop();
    }
    const raised = await startGateway({
      env: { IGGY_MQTT_LIMITS_MAX_CONNECT_PACKET_BYTES: "131072" },
    });
    try {
      const raw = await RawClient.connect(raised.port);
      await raw.send(big);
      const connack = await raw.readPacket();
      raw.close();
      // Read whole and answered: no such user (CONNACK 4), not a close at the header.
      assert.deepEqual([...(connack ?? [])], [0x20, 2, 0, 4]);
    } finally {
      await raised.stop();
    }
  },
});

/** A raw 3.1.1 client that sends `bytes` of a 500 KB QoS 1 PUBLISH and stalls. */
async function stalledSender(gw: TestGateway, id: string, bytes: number): Promise<RawClient> {
  const c = await connectRaw(gw.port, id);
  await c.send(publishPacket("sensors/slow/data", payloadOf(500_000), 1, 7).subarray(0, bytes));
  return c;
}

for (const layer of ["node", "epoll"]) {
  Deno.test({
    name:
      `${layer} layer: slow senders each 400 KB into a 500 KB PUBLISH fill max_partial_packet_bytes_total; the one past it is closed, counted, logged once; the others and a 100 KB publisher go on`,
    ...opts,
    async fn() {
      const budget = 4 * MIB + 64 * 1024; // room for ten stalled 400 KB parts, and a 100 KB publish
      const gw = await startGateway({
        env: {
          IGGY_MQTT_LISTENERS_TCP_SOCKET_LAYER: layer,
          IGGY_MQTT_LIMITS_MAX_PARTIAL_PACKET_BYTES_TOTAL: String(budget),
          IGGY_MQTT_GATEWAY_LOG_LEVEL: "info",
        },
      });
      const held = () => metric(gw, "mqtt_partial_packet_bytes");
      const slow: RawClient[] = [];
      try {
        for (let i = 0; i < 10; i++) {
          slow.push(await stalledSender(gw, `slow-${i}`, 400_000));
          await waitFor(() => held() === (i + 1) * 400_000, 5000, `sender ${i}'s 400 KB held`);
        }
        // An eleventh would take the total past the bound: closed, its bytes given back.
        const over = await stalledSender(gw, "slow-over", 400_000);
        assert.ok(await over.closedByPeer(5000), "the sender past the bound is closed");
        over.close();
        assert.equal(held(), 4_000_000, "the refused sender's bytes are given back");
        assert.equal(metric(gw, "mqtt_partial_packet_refused_total"), 1);
        const warned = gw.logs.filter((l) => l.includes("Partly received packets at their bound"));
        assert.equal(warned.length, 1, gw.logs.slice(-5).join("\n"));
        assert.match(warned[0], /"level":"warn"/);
        assert.match(warned[0], /max_partial_packet_bytes_total/);

        // The gateway goes on: a 100 KB publish within the room left is PUBACKed.
        const url = `mqtt://127.0.0.1:${gw.port}`;
        const pub = await mqtt.connectAsync(url, { clientId: "fits", reconnectPeriod: 0 });
        await pub.publishAsync("sensors/fits/data", payloadOf(100_000), { qos: 1 });
        // A stalled sender finishes its packet and gets its PUBACK: its bytes were kept.
        const rest = publishPacket("sensors/slow/data", payloadOf(500_000), 1, 7).subarray(400_000);
        await slow[0].send(rest);
        const ack = await slow[0].readPacket(5000);
        assert.deepEqual(ack && [...ack], [0x40, 2, 0, 7]);
        await waitFor(() => held() === 3_600_000, 5000, "the finished packet's bytes given back");
        // Stalled senders that leave give theirs back; then a 500 KB publish passes again.
        for (const c of slow.splice(1, 5)) c.close();
        await waitFor(() => held() === 1_600_000, 5000, "closed senders' bytes given back");
        await pub.publishAsync("sensors/fits/data", payloadOf(500_000), { qos: 1 });
        await pub.endAsync();
        assert.equal(metric(gw, "mqtt_partial_packet_refused_total"), 1);
      } finally {
        for (const c of slow) c.close();
        await gw.stop();
      }
    },
  });
}

Deno.test({
  name:
    "an MQTT 5 client whose read would pass max_partial_packet_bytes_total gets DISCONNECT 0x89 (Server busy)",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: { IGGY_MQTT_LIMITS_MAX_PARTIAL_PACKET_BYTES_TOTAL: String(MIB + 200_000) },
    });
    const slow: RawClient[] = [];
    try {
      for (let i = 0; i < 3; i++) slow.push(await stalledSender(gw, `slow-${i}`, 400_000));
      await waitFor(() => metric(gw, "mqtt_partial_packet_bytes") === 1_200_000, 5000, "held");
      const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        reconnectPeriod: 0,
      });
      const disconnect = new Promise<number | undefined>((resolve) =>
        c.on("disconnect", (p) => resolve(p.reasonCode))
      );
      c.publish("sensors/x/data", payloadOf(500_000), { qos: 1 });
      assert.equal(await disconnect, 0x89);
      c.end(true);
      assert.equal(metric(gw, "mqtt_partial_packet_refused_total"), 1);
      assert.equal(metric(gw, "mqtt_partial_packet_bytes"), 1_200_000);
    } finally {
      for (const c of slow) c.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "300 connections that each announced a 1 MiB PUBLISH and sent 5 bytes of it hold 1,500 bytes, not 300 MiB (no buffer of the announced size)",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_GATEWAY_LOG_LEVEL: "info" } });
    const clients: RawClient[] = [];
    try {
      // Warm up one connection first, so what is measured is per connection.
      clients.push(await connectRaw(gw.port, "warm"));
      const rssBefore = Deno.memoryUsage().rss;
      const header = [0x32, 0x80, 0x80, 0x40]; // remaining length 1 MiB (the default limit)
      for (let i = 0; i < 300; i++) {
        const c = await connectRaw(gw.port, `idle-${i}`);
        await c.send([...header, 0]);
        clients.push(c);
      }
      await waitFor(() => metric(gw, "mqtt_partial_packet_bytes") === 1500, 10_000, "all held");
      const growth = Deno.memoryUsage().rss - rssBefore;
      assert.ok(growth < 60 * MIB, `rss grew by ${(growth / MIB).toFixed(1)} MB for 300 sockets`);
    } finally {
      for (const c of clients) c.close();
      await gw.stop();
    }
  },
});

/** An MQTT 3.1.1 client over ws:// past its CONNACK; `closed` resolves when the socket closes. */
async function wsClient(gw: TestGateway, id: string) {
  const ws = new WebSocket(`ws://127.0.0.1:${gw.wsPort}/mqtt`, "mqtt");
  ws.binaryType = "arraybuffer";
  const frames: Uint8Array[] = [];
  ws.onmessage = (e) => frames.push(new Uint8Array(e.data));
  const closed = new Promise((resolve) => ws.onclose = resolve);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  ws.send(connectPacket(id));
  await waitFor(() => frames.length > 0, 3000, "CONNACK");
  return { ws, closed };
}

Deno.test({
  name:
    "WebSocket: PUBLISHes cut across frames are held within max_partial_packet_bytes_total; the frame past it closes its connection, the bytes given back",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: {
        IGGY_MQTT_LISTENERS_WS: "127.0.0.1:0",
        IGGY_MQTT_LIMITS_MAX_PARTIAL_PACKET_BYTES_TOTAL: String(MIB + 100_000),
      },
    });
    try {
      const held = () => metric(gw, "mqtt_partial_packet_bytes");
      const publish = publishPacket("sensors/ws/data", payloadOf(MIB - 100), 1, 3);
      const first = await wsClient(gw, "ws-slow-1");
      first.ws.send(publish.subarray(0, 600_000));
      await waitFor(() => held() === 600_000, 5000, "the first 600 KB held");
      const second = await wsClient(gw, "ws-slow-2");
      second.ws.send(publish.subarray(0, 600_000)); // 1.2 MB > 1 MiB + 100 KB: refused
      await second.closed;
      assert.equal(metric(gw, "mqtt_partial_packet_refused_total"), 1);
      assert.equal(held(), 600_000, "the first sender's bytes are kept");
      first.ws.close();
      await first.closed;
      await waitFor(() => held() === 0, 5000, "given back when it closes");
    } finally {
      await gw.stop();
    }
  },
});

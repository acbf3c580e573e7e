/**
 * MQTT 5 server DISCONNECTs over real sockets: a malformed or forbidden packet from a v5
 * client is answered with DISCONNECT and its reason code (and a reason string), then the
 * connection is closed and counted; the gateway keeps serving. Keep-alive timeout (0x8D),
 * session taken over (0x8E) and server shutting down (0x8B) with MQTT.js; a client's
 * DISCONNECT 0x04 publishes its will.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import mqtt from "mqtt";
import {
  connectRaw,
  RawClient,
  startGateway,
  type TestGateway,
  varint,
  waitFor,
} from "../helpers/gateway.ts";

const opts = {};

const enc = new TextEncoder();
const str = (
  s: string,
) => [...[enc.encode(s).length >> 8, enc.encode(s).length & 0xff], ...enc.encode(s)];
const packet = (byte1: number, body: readonly number[]) =>
  new Uint8Array([byte1, ...varint(body.length), ...body]);

/** A v5 CONNECT: clean start, keep-alive, no properties, client id. */
function connect5(clientId: string, keepAlive = 60): Uint8Array {
  return packet(0x10, [
    ...str("MQTT"),
    5,
    2,
    keepAlive >> 8,
    keepAlive & 0xff,
    0,
    ...str(clientId),
  ]);
}

async function connectRaw5(gw: TestGateway, clientId: string, keepAlive = 60): Promise<RawClient> {
  const c = await RawClient.connect(gw.port);
  await c.send(connect5(clientId, keepAlive));
  const ack = await c.readPacket();
  assert.ok(ack !== null && ack[0] === 0x20 && ack[3] === 0, `CONNACK 0, got ${ack && [...ack]}`);
  return c;
}

/** The reason code and reason string of a DISCONNECT packet. */
function disconnectOf(p: Uint8Array | null): { code: number; reason: string } {
  assert.ok(p !== null && p[0] === 0xe0, `DISCONNECT expected, got ${p && [...p]}`);
  let i = 1;
  while (p[i] & 0x80) i++;
  const body = p.subarray(i + 1);
  const code = body[0];
  // Properties: length, then 0x1F reason string.
  const reason = body.length > 4 && body[2] === 0x1f
    ? new TextDecoder().decode(body.subarray(5, 5 + ((body[3] << 8) | body[4])))
    : "";
  return { code, reason };
}

/** [name, bytes sent after a v5 CONNECT, DISCONNECT reason code]. */
// deno-fmt-ignore
const CASES: [string, Uint8Array, number][] = [
  ["PUBLISH with a property not allowed in it (0x81)", packet(0x30, [...str("a/b"), 2, 0x11, 0, 0x78]), 0x81],
  ["PUBLISH with a repeated property (0x82)", packet(0x30, [...str("a/b"), 4, 0x01, 0, 0x01, 0, 0x78]), 0x82],
  ["PUBREL with flags 0x0 (0x81 malformed)", packet(0x60, [0, 1]), 0x81],
  ["PUBLISH of the default max_packet_bytes + 1 (0x95)", new Uint8Array([0x30, 0x81, 0x80, 0x40]), 0x95],
  ["PUBLISH with an empty topic and no alias (0x82)", packet(0x30, [0, 0, 0, 0x78]), 0x82],
  ["SUBSCRIBE with Retain Handling 3 (0x82)", packet(0x82, [0, 1, 0, ...str("a"), 0x30]), 0x82],
  ["AUTH (0x82: no enhanced authentication)", packet(0xf0, [0x18, 0]), 0x82],
  ["QoS 0 PUBLISH marked UTF-8 with a non-UTF-8 payload (0x99)", packet(0x30, [...str("sensors/x/data"), 2, 0x01, 1, 0xff]), 0x99],
];

Deno.test({
  name:
    "MQTT 5 malformed and forbidden packets get DISCONNECT with their reason code and a reason string, then close; counted; the gateway keeps serving",
  ...opts,
  async fn(t) {
    const gw = await startGateway();
    const witness = await connectRaw(gw.port, "witness");
    try {
      let n = 0;
      for (const [name, bytes, code] of CASES) {
        await t.step({
          name,
          ...opts,
          async fn() {
            const before = [...gw.view.metrics.protocolErrors.values.values()].reduce(
              (a, b) => a + b,
              0,
            );
            const c = await connectRaw5(gw, `bad-${n++}`);
            await c.send(bytes);
            const d = disconnectOf(await c.readPacket());
            assert.equal(d.code, code, d.reason);
            assert.ok(d.reason.length > 0, "a reason string");
            assert.ok(await c.closedByPeer(), "closed after the DISCONNECT");
            c.close();
            if (code !== 0x99) {
              const after = [...gw.view.metrics.protocolErrors.values.values()].reduce(
                (a, b) => a + b,
                0,
              );
              assert.equal(after, before + 1, "counted as a protocol error");
            }
            await witness.send([0xc0, 0]);
            assert.deepEqual([...(await witness.readPacket())!], [0xd0, 0]);
          },
        });
      }
    } finally {
      witness.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 DISCONNECT from the server: 0x8D keep-alive timeout, 0x8E session taken over, 0x8B server shutting down (MQTT.js sees each)",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const silent = await connectRaw5(gw, "silent", 1);
      const d = disconnectOf(await silent.readPacket(4000));
      assert.equal(d.code, 0x8d);
      silent.close();
      const reasons: number[] = [];
      const first = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        clientId: "twin",
        reconnectPeriod: 0,
      });
      first.on("disconnect", (p) => reasons.push(p.reasonCode ?? -1));
      const second = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        clientId: "twin",
        reconnectPeriod: 0,
      });
      await waitFor(() => reasons.length === 1, 5000, "takeover DISCONNECT");
      assert.equal(reasons[0], 0x8e);
      second.on("disconnect", (p) => reasons.push(p.reasonCode ?? -1));
      await gw.stop();
      await waitFor(() => reasons.length === 2, 5000, "shutdown DISCONNECT");
      assert.equal(reasons[1], 0x8b);
      first.end(true);
      second.end(true);
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "MQTT 5 DISCONNECT 0x04 from the client publishes its will; DISCONNECT 0x00 does not",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const watcher = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        reconnectPeriod: 0,
      });
      const wills: string[] = [];
      watcher.on("message", (_t, m) => wills.push(m.toString()));
      await watcher.subscribeAsync("sensors/will/data", { qos: 1 });
      for (const [id, reasonCode] of [["w-normal", 0], ["w-with-will", 4]] as const) {
        const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
          protocolVersion: 5,
          clientId: id,
          reconnectPeriod: 0,
          will: { topic: "sensors/will/data", payload: Buffer.from(id), qos: 1, retain: false },
        });
        await c.endAsync(false, { reasonCode });
      }
      await waitFor(() => wills.length === 1, 5000, "the will");
      // Barrier: both devices' connections are closed (their wills decided), then an end
      // marker on the wills' partition comes after any will appended before it.
      await waitFor(() => gw.view.connections === 1, 5000, "the devices' connections closed");
      await watcher.publishAsync("sensors/will/data", "end", { qos: 1 });
      await waitFor(() => wills.includes("end"), 5000, "the end marker");
      assert.deepEqual(wills, ["w-with-will", "end"]);
      await watcher.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 will delay (MQTT.js): with session.max_expiry_s = 0 the CONNACK caps session expiry to 0, so the session ends with the connection and the delayed will goes out at once [MQTT-3.1.3-9]",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_SESSION_MAX_EXPIRY_S: "0" } });
    try {
      const watcher = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        reconnectPeriod: 0,
      });
      const wills: string[] = [];
      watcher.on("message", (_t, m, p) => wills.push(`${m} ${p.properties?.contentType}`));
      await watcher.subscribeAsync("sensors/wd/data", { qos: 1 });
      const dev = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        clientId: "wd-dev",
        reconnectPeriod: 0,
        properties: { sessionExpiryInterval: 600 },
        will: {
          topic: "sensors/wd/data",
          payload: Buffer.from("offline"),
          qos: 1,
          retain: false,
          properties: { willDelayInterval: 120, contentType: "text/plain" },
        },
      });
      // deno-lint-ignore no-explicit-any
      assert.equal((dev as any).connackPacket?.properties?.sessionExpiryInterval, 0);
      // deno-lint-ignore no-explicit-any
      (dev as any).stream.destroy(); // the network connection ends without DISCONNECT
      await waitFor(() => wills.length === 1, 5000, "the will, well before 120 s");
      assert.deepEqual(wills, ["offline text/plain"]);
      dev.end(true);
      await watcher.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 CONNACK 0x97 over max_connections and 0x9F over the per-source connection rate (MQTT.js), with a reason string",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: {
        IGGY_MQTT_LIMITS_MAX_CONNECTIONS: "1",
        IGGY_MQTT_LIMITS_MAX_CONNECTION_RATE_PER_SOURCE: "0",
      },
    });
    try {
      const first = await connectRaw5(gw, "only-one");
      const refused = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        reconnectPeriod: 0,
      }).then(() => null, (e) => e);
      assert.equal(refused?.code, 0x97, String(refused));
      first.close();
    } finally {
      await gw.stop();
    }
    const rated = await startGateway({
      env: { IGGY_MQTT_LIMITS_MAX_CONNECTION_RATE_PER_SOURCE: "1" },
    });
    try {
      const codes: number[] = [];
      for (let i = 0; i < 4; i++) {
        const r = await mqtt.connectAsync(`mqtt://127.0.0.1:${rated.port}`, {
          protocolVersion: 5,
          reconnectPeriod: 0,
        }).then((c) => (c.end(true), 0), (e) => e.code);
        codes.push(r);
      }
      assert.ok(codes.includes(0x9f), `codes ${codes}`);
    } finally {
      await rated.stop();
    }
  },
});

/** A v5 device with a stored session (expiry 600) and a will delayed `delayS` seconds. */
function willDevice(gw: TestGateway, clean: boolean, delayS: number) {
  return mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
    protocolVersion: 5,
    clientId: "wd-take",
    clean,
    reconnectPeriod: 0,
    properties: { sessionExpiryInterval: 600 },
    will: {
      topic: "sensors/wdt/data",
      payload: Buffer.from("offline"),
      qos: 1,
      retain: false,
      properties: { willDelayInterval: delayS },
    },
  });
}

Deno.test({
  name:
    "MQTT 5 will delay (MQTT.js): a session taken over with Clean Start 0 before the delay passed sends no will; with Clean Start 1 the old session ends and its will goes out at once [MQTT-3.1.3-9, MQTT-3.1.4-3]",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const watcher = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        reconnectPeriod: 0,
      });
      const wills: string[] = [];
      watcher.on("message", (_t, m) => wills.push(m.toString()));
      await watcher.subscribeAsync("sensors/wdt/data", { qos: 1 });
      const first = await willDevice(gw, false, 2);
      const second = await willDevice(gw, false, 2); // takes the session over
      // Real time: the 2 s will delay (from the takeover, before the CONNACK) must pass; then
      // an end marker on the wills' partition comes after any will appended before it.
      await new Promise((r) => setTimeout(r, 2100));
      await watcher.publishAsync("sensors/wdt/data", "end", { qos: 1 });
      await waitFor(() => wills.includes("end"), 5000, "the end marker");
      assert.deepEqual(wills, ["end"], "no will: the client came back within its delay");
      first.end(true);
      const third = await willDevice(gw, true, 60); // Clean Start 1 ends the session
      await waitFor(() => wills.length === 2, 5000, "the will, well before 60 s");
      assert.deepEqual(wills, ["end", "offline"]);
      second.end(true);
      await third.endAsync();
      await watcher.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5 will delay (MQTT.js): DISCONNECT 0x04 with Session Expiry Interval 0 ends the session, so the will delayed 60 s goes out at once",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const watcher = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        protocolVersion: 5,
        reconnectPeriod: 0,
      });
      const wills: string[] = [];
      watcher.on("message", (_t, m) => wills.push(m.toString()));
      await watcher.subscribeAsync("sensors/wdt/data", { qos: 1 });
      const dev = await willDevice(gw, false, 60); // session expiry 600 at CONNECT
      await dev.endAsync(false, { reasonCode: 4, properties: { sessionExpiryInterval: 0 } });
      await waitFor(() => wills.length === 1, 5000, "the will, well before 60 s");
      assert.deepEqual(wills, ["offline"]);
      await watcher.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5: one QoS 2 PUBLISH more than the Receive Maximum unanswered (PUBRECed, no PUBREL) gets DISCONNECT 0x93; up to it is fine",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: { IGGY_MQTT_LIMITS_MAX_INFLIGHT_PUBLISHES_PER_CLIENT: "4" },
    });
    try {
      const c = await connectRaw5(gw, "rm-client");
      const publish = (id: number) =>
        packet(0x34, [...str("sensors/rm/data"), id >> 8, id & 0xff, 0, 0x78]);
      for (let id = 1; id <= 4; id++) await c.send(publish(id)); // no PUBREL: all 4 held
      const recs: number[] = [];
      while (recs.length < 4) {
        const p = await c.readPacket();
        assert.ok(p !== null && p[0] === 0x50, `PUBREC expected, got ${p && [...p]}`);
        recs.push((p[2] << 8) | p[3]);
      }
      await c.send(publish(5));
      const d = disconnectOf(await c.readPacket());
      assert.equal(d.code, 0x93, d.reason);
      assert.ok(await c.closedByPeer(), "closed after the DISCONNECT");
      c.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "MQTT 5: a client still writing (PUBRELs) after the gateway's DISCONNECT 0x93 reads every PUBREC and the DISCONNECT, not a reset",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: { IGGY_MQTT_LIMITS_MAX_INFLIGHT_PUBLISHES_PER_CLIENT: "4" },
    });
    try {
      const c = await connectRaw5(gw, "linger-client");
      const publish = (id: number) =>
        packet(0x34, [...str("sensors/rm/data"), id >> 8, id & 0xff, 0, 0x78]);
      const pubrel = (id: number) => new Uint8Array([0x62, 2, id >> 8, id & 0xff]);
      // As Paho's test client does: it publishes all five, then reads and answers PUBRECs, one
      // write every 20 ms (its pacing, kept in real time: the gateway's linger is under test).
      for (let id = 1; id <= 5; id++) {
        await c.send(publish(id));
        await new Promise((r) => setTimeout(r, 20));
      }
      // Barrier: the gateway logs the close in the same run that writes its DISCONNECT.
      await waitFor(
        () => gw.logs.some((l) => l.includes("Connection closed") && l.includes("linger-client")),
        3000,
        "the gateway's DISCONNECT",
      );
      // Paho's client failed here ("Connection reset by peer") when the socket was closed. The
      // four PUBRELs go in one write right after the barrier, not paced by timers: they must
      // reach the gateway within its linger (500 ms), which sleeps on a loaded machine passed.
      await c.send(new Uint8Array([1, 2, 3, 4].flatMap((id) => [...pubrel(id)])));
      const got: number[] = [];
      for (;;) {
        const p = await c.readPacket();
        assert.ok(p !== null, `the connection reset before the DISCONNECT (got ${got})`);
        got.push(p[0]);
        if (p[0] === 0xe0) {
          assert.equal(disconnectOf(p).code, 0x93);
          break;
        }
      }
      assert.deepEqual(got, [0x50, 0x50, 0x50, 0x50, 0xe0]);
      assert.ok(await c.closedByPeer(), "closed after the DISCONNECT");
      c.close();
    } finally {
      await gw.stop();
    }
  },
});

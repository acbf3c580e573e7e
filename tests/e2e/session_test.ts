/**
 * Sessions end to end: authentication, ACL, keep-alive, takeover, connection bounds.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { hashPassword } from "../../src/access/password.ts";
import {
  connectPacket,
  connectRaw,
  pingBarrier,
  publishPacket,
  RawClient,
  startGateway,
  waitFor,
} from "../helpers/gateway.ts";

const opts = {};

async function usersToml(): Promise<string> {
  const h = await hashPassword("right-password", 1000);
  return `
[[users]]
username = "writer"
password_hash = "${h}"
[users.permissions.streams.building_north.topics.telemetry]
send_messages = true

[[users]]
username = "nobody"
password_hash = "${h}"
`;
}

async function storedCount(
  gw: Awaited<ReturnType<typeof startGateway>>,
  stream: string,
  topic: string,
) {
  const info = await gw.view.log.getTopic(stream, topic);
  if (!info) return 0;
  let n = 0;
  for (let p = 0; p < info.partitions; p++) {
    n += (await gw.view.log.poll({ stream, topic, partition: p }, 0, 1000)).length;
  }
  return n;
}

Deno.test({
  name: "CONNECT with a wrong password gets CONNACK 4 and a user without rights gets CONNACK 5",
  ...opts,
  async fn() {
    const gw = await startGateway({ toml: await usersToml() });
    try {
      const a = await RawClient.connect(gw.port);
      await a.send(connectPacket("c1", { username: "writer", password: "wrong" }));
      assert.deepEqual([...(await a.readPacket())!], [0x20, 2, 0, 4]);
      assert.ok(await a.closedByPeer());
      const b = await RawClient.connect(gw.port);
      await b.send(connectPacket("c2", { username: "nobody", password: "right-password" }));
      assert.deepEqual([...(await b.readPacket())!], [0x20, 2, 0, 5]);
      const c = await RawClient.connect(gw.port);
      await c.send(connectPacket("c3", { username: "ghost", password: "x" }));
      assert.deepEqual([...(await c.readPacket())!], [0x20, 2, 0, 4]);
      assert.equal(gw.view.metrics.authFailures.get(), 3);
      // MQTT.js sees the refusal too.
      await assert.rejects(
        mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
          username: "writer",
          password: "wrong",
          reconnectPeriod: 0,
        }),
      );
      [a, b, c].forEach((x) => x.close());
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "ACL: a publish the user may not send is denied (no append, no PUBACK, connection closed [MQTT-3.3.5-2])",
  ...opts,
  async fn() {
    const gw = await startGateway({ toml: await usersToml() });
    try {
      const c = await RawClient.connect(gw.port);
      await c.send(connectPacket("w1", { username: "writer", password: "right-password" }));
      assert.deepEqual([...(await c.readPacket())!], [0x20, 2, 0, 0]);
      // Allowed: building_north/telemetry.
      await c.send(publishPacket("building/north/room/1/t", "ok", 1, 1));
      assert.deepEqual([...(await c.readPacket())!], [0x40, 2, 0, 1]);
      // Denied: building_south/telemetry (no right). QoS 0 denied → dropped, connection stays.
      await c.send(publishPacket("building/south/room/1/t", "no", 0));
      assert.deepEqual(await pingBarrier(c), []);
      // QoS 1 denied → no PUBACK and the connection is closed.
      await c.send(publishPacket("building/south/room/1/t", "no", 1, 2));
      assert.ok(await c.closedByPeer());
      assert.equal(await storedCount(gw, "building_north", "telemetry"), 1);
      assert.equal(await gw.view.log.getTopic("building_south", "telemetry"), null);
      assert.equal(gw.view.metrics.publishes.get({ outcome: "denied" }), 2);
      assert.equal(gw.view.metrics.publishes.get({ outcome: "acked" }), 1);
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "$SYS topics and resolved names over 255 bytes are denied, not appended",
  ...opts,
  async fn() {
    const map =
      `default_stream = "s"\ndefault_topic = "t"\n[[rule]]\nmqtt_topic = '(\\w+)'\nstream = 'x$1$1$1$1'\ntopic = 't'\n`;
    const gw = await startGateway({ map });
    try {
      const c = await connectRaw(gw.port, "sys-1");
      await c.send(publishPacket("$SYS/broker/x", "a", 0));
      await c.send(publishPacket("a".repeat(70), "a", 0)); // stream name 281 bytes
      await c.send(publishPacket("short", "a", 0));
      await pingBarrier(c);
      await waitFor(() => gw.view.metrics.publishes.get({ outcome: "appended" }) === 1);
      assert.equal(gw.view.metrics.publishes.get({ outcome: "denied" }), 2);
      c.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "keep-alive: a client silent for 1.5x its keep-alive is disconnected",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const c = await connectRaw(gw.port, "ka-1", 1);
      const t0 = Date.now();
      assert.ok(await c.closedByPeer(4000), "closed within 1.5 s plus the wheel resolution");
      const elapsed = Date.now() - t0;
      assert.ok(elapsed >= 1400, `closed too early: ${elapsed} ms`);
      assert.equal(gw.view.metrics.keepAliveExpired.get(), 1);
      // A client that pings stays. Real time: 2 s of pings every 0.5 s, past 1.5 × keep-alive.
      const d = await connectRaw(gw.port, "ka-2", 1);
      for (let i = 0; i < 4; i++) {
        await new Promise((r) => setTimeout(r, 500));
        await pingBarrier(d);
      }
      d.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "connect_timeout_ms: a socket that sends no CONNECT is closed",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_CONNECT_TIMEOUT_MS: "300" } });
    try {
      const c = await RawClient.connect(gw.port);
      await c.send([0x10]); // slowloris: one byte of a CONNECT
      assert.ok(await c.closedByPeer(2000));
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "takeover: a second CONNECT with the same client id closes the first connection",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const a = await connectRaw(gw.port, "same-id");
      const b = await connectRaw(gw.port, "same-id");
      assert.ok(await a.closedByPeer());
      assert.deepEqual(await pingBarrier(b), []);
      assert.equal(gw.view.metrics.takeovers.get(), 1);
      b.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "max_connections: the excess socket is closed, the others keep being served",
  ...opts,
  async fn() {
    const gw = await startGateway({ env: { IGGY_MQTT_LIMITS_MAX_CONNECTIONS: "2" } });
    try {
      const a = await connectRaw(gw.port, "m1");
      const b = await connectRaw(gw.port, "m2");
      const c = await RawClient.connect(gw.port);
      assert.ok(await c.closedByPeer());
      assert.deepEqual(await pingBarrier(a), []);
      a.close();
      await waitFor(() => gw.view.connections === 1);
      const d = await connectRaw(gw.port, "m3");
      d.close();
      b.close();
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "CONNECT level 5 on a 3.1.1-only listener gets CONNACK 0x84, MQIsdp 3 gets CONNACK 1; empty client id with clean session gets an id; session.will = refuse gets CONNACK 5",
  ...opts,
  async fn() {
    const gw = await startGateway({
      env: { IGGY_MQTT_SESSION_WILL: "refuse", IGGY_MQTT_LISTENERS_MQTT_VERSIONS: "3.1.1" },
    });
    try {
      const v5 = await RawClient.connect(gw.port);
      // MQTT 5 CONNECT: "MQTT", level 5, clean, keepalive 60, properties length 0, id "x".
      await v5.send([0x10, 14, 0, 4, 77, 81, 84, 84, 5, 2, 0, 60, 0, 0, 1, 120]);
      // An MQTT 5 CONNACK: no session present, 0x84 unsupported protocol version, a reason.
      const connack = [...(await v5.readPacket())!];
      assert.deepEqual([connack[0], connack[2], connack[3]], [0x20, 0, 0x84]);
      assert.ok(await v5.closedByPeer());
      const v3 = await RawClient.connect(gw.port);
      await v3.send([0x10, 15, 0, 6, 77, 81, 73, 115, 100, 112, 3, 2, 0, 60, 0, 1, 120]);
      assert.deepEqual([...(await v3.readPacket())!], [0x20, 2, 0, 1]);
      const empty = await RawClient.connect(gw.port);
      await empty.send(connectPacket(""));
      assert.deepEqual([...(await empty.readPacket())!], [0x20, 2, 0, 0]);
      const emptyDirty = await RawClient.connect(gw.port);
      await emptyDirty.send(connectPacket("", { clean: false }));
      assert.deepEqual([...(await emptyDirty.readPacket())!], [0x20, 2, 0, 2]);
      const dirty = await RawClient.connect(gw.port);
      await dirty.send(connectPacket("persist", { clean: false }));
      // CleanSession=0 accepted as clean: session present = 0.
      assert.deepEqual([...(await dirty.readPacket())!], [0x20, 2, 0, 0]);
      const will = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        reconnectPeriod: 0,
        will: { topic: "a/b", payload: Buffer.from("bye"), qos: 0, retain: false },
      }).then(() => "connected", (e) => String(e));
      assert.match(will, /Not authorized|5/i);
      [v5, v3, empty, emptyDirty, dirty].forEach((x) => x.close());
    } finally {
      await gw.stop();
    }
  },
});

/**
 * QoS 2 end to end [MQTT-4.3.3]: a client's QoS 2 publish is appended once and answered with
 * PUBREC, a resend under the same packet id (DUP) before its PUBREL is not appended again, and
 * PUBREL gets PUBCOMP; a QoS 2 subscription receives QoS 2 copies, a PUBREC settles the copy
 * and is answered with PUBREL; a stored session takes both exchanges up again after a
 * reconnect [MQTT-4.4.0-1]. Over raw sockets (exact bytes) and with MQTT.js (3.1.1 and 5).
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import mqtt from "mqtt";
import {
  connectPacket,
  connectRaw,
  pingBarrier,
  publishPacket,
  RawClient,
  startGateway,
  subscribePacket,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";
import { counter, opts, parsePublish, publishesBefore, receive } from "./_subscribe_helpers.ts";

const TOPIC = "sensors/q2/data";

/** A 4-byte acknowledgement (first byte `type`). */
const ack = (type: number, id: number) => [type, 2, id >> 8, id & 0xff];
const PUBACK = 0x40, PUBREC = 0x50, PUBREL = 0x62, PUBCOMP = 0x70;

/** Publishes the gateway took (every outcome; here all are acknowledged appends). */
const published = (gw: TestGateway) => counter(gw, "mqtt_publishes_total");

async function subscriber(gw: TestGateway, id: string, qos: number, clean = true) {
  const c = await RawClient.connect(gw.port);
  await c.send(connectPacket(id, { clean }));
  const connack = await c.readPacket();
  await c.send(subscribePacket(1, [[TOPIC, qos]]));
  const suback = await c.readPacket();
  assert.deepEqual(suback && [...suback], [0x90, 3, 0, 1, qos]);
  return { c, sessionPresent: connack![2] === 1 };
}

Deno.test({
  name: "QoS 2 in: PUBREC once appended, a DUP resend is not appended again, PUBREL gets PUBCOMP",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const { c: sub } = await subscriber(gw, "q2-watch", 1);
    const pub = await connectRaw(gw.port, "q2-pub");
    try {
      await pub.send(publishPacket(TOPIC, "once", 2, 5));
      assert.deepEqual([...(await pub.readPacket())!], ack(PUBREC, 5));
      // The PUBREC was lost on the way (as far as the client knows): it sends the PUBLISH again.
      await pub.send(publishPacket(TOPIC, "once", 2, 5, true));
      assert.deepEqual([...(await pub.readPacket())!], ack(PUBREC, 5));
      await pub.send(ack(PUBREL, 5));
      assert.deepEqual([...(await pub.readPacket())!], ack(PUBCOMP, 5));
      // A PUBREL the gateway does not know is still completed (3.1.1 has no reason codes).
      await pub.send(ack(PUBREL, 6));
      assert.deepEqual([...(await pub.readPacket())!], ack(PUBCOMP, 6));
      // The id is free again: a new message under it is a new message.
      await pub.send(publishPacket(TOPIC, "twice", 2, 5));
      assert.deepEqual([...(await pub.readPacket())!], ack(PUBREC, 5));
      const got = await receive(sub, 2);
      assert.deepEqual(got.map((r) => [r.payload, r.qos]), [["once", 1], ["twice", 1]]);
      assert.deepEqual(await publishesBefore(sub), [], "the resend made no second copy");
    } finally {
      sub.close();
      pub.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name: "QoS 2 out: a QoS 2 copy, PUBREC settles it and gets PUBREL, PUBCOMP frees the id",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const { c: sub } = await subscriber(gw, "q2-sub", 2);
    const pub = await connectRaw(gw.port, "q2-pub");
    try {
      await pub.send(publishPacket(TOPIC, "q1", 1, 1));
      await pub.send(publishPacket(TOPIC, "q2", 2, 2));
      const got = await receive(sub, 2, { ack: false });
      assert.deepEqual(got.map((r) => [r.payload, r.qos]), [["q1", 1], ["q2", 2]]);
      const [q1, q2] = got;
      await sub.send(ack(PUBACK, q1.packetId));
      await sub.send(ack(PUBREC, q2.packetId));
      assert.deepEqual([...(await sub.readPacket())!], ack(PUBREL, q2.packetId));
      // Settled at the PUBREC: nothing of this triple is unsettled any more.
      await waitFor(
        () => gw.view.readers().every((r) => r.unsettled === 0),
        3000,
        "settled",
      );
      await sub.send(ack(PUBCOMP, q2.packetId));
      assert.deepEqual(await pingBarrier(sub), [], "nothing more: no resend of the PUBLISH");
      assert.ok(counter(gw, "mqtt_deliveries_total") >= 2);
    } finally {
      sub.close();
      pub.close();
      await gw.stop();
    }
  },
});

Deno.test({
  name: "QoS 2 and a stored session: the PUBREL comes again after a reconnect, and a resent " +
    "PUBLISH is answered without a second append [MQTT-4.4.0-1]",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      // Out: the client PUBRECs a copy and leaves before its PUBCOMP.
      const first = await subscriber(gw, "q2-dev", 2, false);
      const pub = await connectRaw(gw.port, "q2-pub");
      await pub.send(publishPacket(TOPIC, "owned", 2, 9));
      assert.deepEqual([...(await pub.readPacket())!], ack(PUBREC, 9));
      const [copy] = await receive(first.c, 1, { ack: false });
      await first.c.send(ack(PUBREC, copy.packetId));
      assert.deepEqual([...(await first.c.readPacket())!], ack(PUBREL, copy.packetId));
      // In: the same client publishes at QoS 2, gets its PUBREC, and leaves before its PUBREL.
      await first.c.send(publishPacket(TOPIC, "mine", 2, 77));
      // Its PUBREC and the copy of its own message (QoS 2), in either order.
      const two = [(await first.c.readPacket())!, (await first.c.readPacket())!];
      assert.deepEqual(two.filter((p) => p[0] === PUBREC).map((p) => [...p]), [ack(PUBREC, 77)]);
      const own = parsePublish(two.find((p) => p[0] >> 4 === 3)!);
      assert.deepEqual([own.payload, own.qos], ["mine", 2]);
      first.c.close();
      await waitFor(() => gw.view.storedSession("q2-dev")?.offlineSinceMs != null, 3000, "off");

      const again = await RawClient.connect(gw.port);
      await again.send(connectPacket("q2-dev", { clean: false }));
      assert.deepEqual([...(await again.readPacket())!], [0x20, 2, 1, 0]);
      // The PUBREL of the copy it owns comes again, not the PUBLISH.
      const resumed = await pingBarrier(again);
      const pubrels = resumed.filter((p) => p[0] === PUBREL).map((p) => [...p]);
      assert.deepEqual(pubrels, [ack(PUBREL, copy.packetId)]);
      // Its own copy was never PUBRECed: that PUBLISH comes again, DUP set.
      const redelivered = resumed.filter((p) => p[0] >> 4 === 3).map(parsePublish);
      assert.deepEqual(redelivered.map((r) => [r.payload, r.qos, r.dup]), [["mine", 2, true]]);
      assert.equal(redelivered[0].packetId, own.packetId);
      // Its resent PUBLISH 77 is still held: PUBREC again, no second append.
      const before = gw.view.readers()[0].position;
      await again.send(publishPacket(TOPIC, "mine", 2, 77, true));
      assert.deepEqual([...(await again.readPacket())!], ack(PUBREC, 77));
      await again.send(ack(PUBREL, 77));
      assert.deepEqual([...(await again.readPacket())!], ack(PUBCOMP, 77));
      await again.send(ack(PUBCOMP, copy.packetId));
      await again.send(ack(PUBREC, own.packetId));
      assert.deepEqual([...(await again.readPacket())!], ack(PUBREL, own.packetId));
      assert.deepEqual(await pingBarrier(again), []);
      assert.equal(gw.view.readers()[0].position, before, "no second append");
      again.close();
      pub.close();
    } finally {
      await gw.stop();
    }
  },
});

for (const protocolVersion of [4, 5] as const) {
  Deno.test({
    name: `QoS 2 with MQTT.js (${protocolVersion === 4 ? "3.1.1" : "5"}): publish and receive ` +
      "at QoS 2, each message once",
    ...opts,
    async fn() {
      const gw = await startGateway();
      const url = `mqtt://127.0.0.1:${gw.port}`;
      const sub = await mqtt.connectAsync(url, { clientId: "js-sub", protocolVersion });
      const pub = await mqtt.connectAsync(url, { clientId: "js-pub", protocolVersion });
      try {
        const got: [string, number][] = [];
        sub.on("message", (_t, payload, packet) => got.push([String(payload), packet.qos]));
        const granted = await sub.subscribeAsync(TOPIC, { qos: 2 });
        assert.equal(granted[0].qos, 2);
        for (let i = 0; i < 20; i++) await pub.publishAsync(TOPIC, `m${i}`, { qos: 2 });
        // Barrier: an end marker on the same partition comes after every copy before it.
        await pub.publishAsync(TOPIC, "end", { qos: 2 });
        await waitFor(() => got.some(([p]) => p === "end"), 5000, "20 messages and the end");
        assert.deepEqual(got, [...Array.from({ length: 20 }, (_, i) => [`m${i}`, 2]), ["end", 2]]);
        assert.equal(published(gw), 21, "each appended once");
      } finally {
        await sub.endAsync();
        await pub.endAsync();
        await gw.stop();
      }
    },
  });
}

Deno.test({
  name: "QoS 2, MQTT 5: a PUBREL of an unknown packet id gets PUBCOMP 0x92; a QoS 2 will is taken",
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        clientId: "v5-rel",
        protocolVersion: 5,
        will: { topic: TOPIC, payload: Buffer.from("gone"), qos: 2, retain: false },
      });
      const comps: { messageId?: number; reasonCode?: number }[] = [];
      c.on("packetreceive", (p) => p.cmd === "pubcomp" && comps.push(p));
      c.stream.write(new Uint8Array(ack(PUBREL, 4242)));
      await waitFor(() => comps.length === 1, 3000, "PUBCOMP");
      assert.equal(comps[0].messageId, 4242);
      assert.equal(comps[0].reasonCode, 0x92);
      await c.endAsync();
    } finally {
      await gw.stop();
    }
  },
});

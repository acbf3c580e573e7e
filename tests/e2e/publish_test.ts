/**
 * The way in, end to end: real clients publish, the log holds the message exactly.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import {
  connectRaw,
  HAS_MOSQUITTO_CLIENTS,
  publishPacket,
  run,
  startGateway,
  waitFor,
} from "../helpers/gateway.ts";
import { partitionForKey } from "../../src/mapping/mod.ts";

const opts = {};

Deno.test({
  name:
    "mosquitto_pub QoS 1 is stored in building_north/telemetry at XXH32(room_42) mod N with mqtt.* headers",
  ignore: !HAS_MOSQUITTO_CLIENTS,
  ...opts,
  async fn() {
    const gw = await startGateway();
    try {
      const r = await run("mosquitto_pub", [
        "-p",
        String(gw.port),
        "-h",
        "127.0.0.1",
        "-q",
        "1",
        "-i",
        "dev-1",
        "-t",
        "building/north/room/42/temp",
        "-m",
        "21.5",
      ]);
      assert.equal(r.code, 0, r.stderr);
      const partition = partitionForKey("room_42", 3);
      const msgs = await gw.view.log.poll(
        { stream: "building_north", topic: "telemetry", partition },
        0,
        10,
      );
      assert.equal(msgs.length, 1);
      assert.equal(new TextDecoder().decode(msgs[0].payload), "21.5");
      assert.deepEqual(Object.fromEntries(msgs[0].headers), {
        "mqtt.topic": "building/north/room/42/temp",
        "mqtt.qos": "1",
        "mqtt.client_id": "dev-1",
        "mqtt.packet_id": msgs[0].headers.get("mqtt.packet_id"),
      });
      assert.match(msgs[0].headers.get("mqtt.packet_id")!, /^[1-9]\d*$/);
    } finally {
      await gw.stop();
    }
  },
});

Deno.test({
  name: "MQTT.js QoS 0 and QoS 1 publishes are stored with exact payload bytes and retain header",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
      clientId: "js-1",
      reconnectPeriod: 0,
    });
    try {
      const bin = new Uint8Array([0, 1, 2, 250, 255]);
      await client.publishAsync("sensors/abc/data", Buffer.from(bin), { qos: 1, retain: true });
      await client.publishAsync("sensors/abc/data", "q0", { qos: 0 });
      const partition = partitionForKey("sensor_abc", 3);
      const address = { stream: "sensors", topic: "sensor_data", partition };
      let msgs: Awaited<ReturnType<typeof gw.view.log.poll>> = [];
      await waitFor(
        async () => {
          msgs = await gw.view.log.poll(address, 0, 10);
          return msgs.length >= 2;
        },
        5000,
        "both publishes in the log",
      );
      assert.equal(msgs.length, 2);
      assert.deepEqual([...msgs[0].payload], [...bin]);
      assert.equal(msgs[0].headers.get("mqtt.retain"), "true");
      assert.equal(msgs[0].headers.get("mqtt.qos"), "1");
      assert.equal(msgs[1].headers.get("mqtt.qos"), "0");
      assert.equal(msgs[1].headers.get("mqtt.packet_id"), undefined);
      assert.equal(msgs[1].headers.get("mqtt.retain"), undefined);
    } finally {
      await client.endAsync();
      await gw.stop();
    }
  },
});

Deno.test({
  name:
    "empty payload is stored as one byte with mqtt.empty and the topic falls back to the default",
  ...opts,
  async fn() {
    const gw = await startGateway();
    const c = await connectRaw(gw.port, "empty-1");
    try {
      await c.send(publishPacket("some/other/topic", "", 1, 7));
      // The PUBACK waits for the append to be on disk; a PINGRESP would not: read the PUBACK.
      assert.deepEqual([...(await c.readPacket(5000)) ?? []], [0x40, 2, 0, 7]);
      const all = [];
      for (let p = 0; p < 3; p++) {
        all.push(
          ...await gw.view.log.poll(
            { stream: "sensors", topic: "messages_default", partition: p },
            0,
            10,
          ),
        );
      }
      assert.equal(all.length, 1);
      assert.equal(all[0].payload.length, 1);
      assert.equal(all[0].headers.get("mqtt.empty"), "true");
      assert.equal(all[0].headers.get("mqtt.topic"), "some/other/topic");
    } finally {
      c.close();
      await gw.stop();
    }
  },
});

/**
 * Live delivery does not wait for the disk, PUBACK does (ARCHITECTURE "Durability and
 * visibility"): with the store's fsync held, an MQTT.js subscriber already has the message
 * while the MQTT.js publisher still waits for its PUBACK; releasing the fsync sends it. A
 * failed fsync never acknowledges.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { startGateway, waitFor } from "../helpers/gateway.ts";
import { mqttjsPing } from "./_subscribe_helpers.ts";

const opts = {};

/** Holds every `syncData()` (the store's fsync) until released or failed. */
function holdSyncs() {
  const original = Deno.FsFile.prototype.syncData;
  const held: PromiseWithResolvers<void>[] = [];
  let holding = true;
  Deno.FsFile.prototype.syncData = function (this: Deno.FsFile) {
    if (!holding) return original.call(this);
    const h = Promise.withResolvers<void>();
    held.push(h);
    return h.promise.then(() => original.call(this));
  };
  return {
    get count() {
      return held.length;
    },
    releaseAll() {
      holding = false;
      for (const h of held.splice(0)) h.resolve();
    },
    failAll() {
      for (const h of held.splice(0)) h.reject(new Error("EIO: input/output error"));
    },
    [Symbol.dispose]() {
      Deno.FsFile.prototype.syncData = original;
      for (const h of held.splice(0)) h.resolve();
    },
  };
}

/**
 * A gateway with an MQTT.js subscriber to `topic` and a publisher, the topic created and one
 * message delivered before anything is held.
 */
async function liveSetup(name: string, topic: string) {
  const gw = await startGateway();
  const sub = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
    clientId: `${name}-sub`,
    reconnectPeriod: 0,
  });
  const pub = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
    clientId: `${name}-pub`,
    reconnectPeriod: 0,
  });
  const got: string[] = [];
  sub.on("message", (_topic, payload) => got.push(payload.toString()));
  await sub.subscribeAsync({ [topic]: { qos: 1 } });
  // Creates the topic (its creation and first append are on disk before anything is held).
  await pub.publishAsync(topic, "first", { qos: 1 });
  await waitFor(() => got.length === 1, 5000, "the first message");
  return { gw, sub, pub, got };
}

Deno.test({
  name:
    "a subscriber gets a QoS 1 message once committed; its publisher's PUBACK waits for the fsync",
  ...opts,
  async fn() {
    const { gw, sub, pub, got } = await liveSetup("live", "sensors/live/data");
    try {
      using held = holdSyncs();
      let acked = false;
      const pubacks: number[] = [];
      pub.on("packetreceive", (p) => p.cmd === "puback" && pubacks.push(p.messageId!));
      const publish = pub.publishAsync("sensors/live/data", "second", { qos: 1 }).then(() => {
        acked = true;
      });
      await waitFor(() => got.length === 2, 5000, "the second message before its fsync");
      assert.deepEqual(got, ["first", "second"]);
      assert.ok(held.count >= 1, "the fsync is held");
      // Barrier: the gateway committed and delivered the message; a PUBACK sent without the
      // fsync would reach the publisher before the PINGRESP.
      await mqttjsPing(pub);
      assert.deepEqual(pubacks, [], "no PUBACK before the fsync");
      assert.equal(acked, false, "no PUBACK before the fsync");
      held.releaseAll();
      await publish;
      assert.equal(acked, true);
    } finally {
      await sub.endAsync();
      await pub.endAsync();
      await gw.stop();
    }
  },
});

Deno.test({
  name: "a failed fsync sends no PUBACK, though live subscribers already had the message",
  ...opts,
  async fn() {
    const { gw, sub, pub, got } = await liveSetup("live2", "sensors/live2/data");
    try {
      using held = holdSyncs();
      let acked = false;
      const pubacks: number[] = [];
      pub.on("packetreceive", (p) => p.cmd === "puback" && pubacks.push(p.messageId!));
      pub.publishAsync("sensors/live2/data", "second", { qos: 1 }).then(
        () => acked = true,
        () => {},
      );
      await waitFor(() => got.length === 2 && held.count >= 1, 5000, "delivery, fsync held");
      held.failAll();
      await waitFor(
        () => gw.logs.some((l) => l.includes("Append failed; no PUBACK")),
        5000,
        "the failed append logged",
      );
      // Barrier: the append's outcome is settled. A PUBACK would come before the PINGRESP, or
      // before the close that ends a 3.1.1 connection whose publish failed.
      await mqttjsPing(pub, { orClose: true });
      assert.deepEqual(pubacks, [], "no PUBACK after a failed fsync");
      assert.equal(acked, false, "no PUBACK after a failed fsync");
    } finally {
      sub.end(true);
      pub.end(true);
      await gw.stop();
    }
  },
});

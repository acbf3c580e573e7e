/**
 * Retained messages in Iggy mode (issue 38), against a real Iggy server when `IGGY_TEST_ADDRESS`
 * is set (`IGGY_TEST_USERNAME` / `IGGY_TEST_PASSWORD`, default iggy/iggy); ignored with a warning
 * otherwise. Two gateways share one Iggy and its retained topic: a set through one is received by
 * a new subscriber of the other, a clear through the other is seen by the first, within one poll;
 * a restarted gateway reads the set back from the latest snapshot.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { startGateway, type TestGateway, waitFor } from "../helpers/gateway.ts";
import { mqttjsPing } from "./_subscribe_helpers.ts";

const ADDRESS = Deno.env.get("IGGY_TEST_ADDRESS") ?? "";
const USER = Deno.env.get("IGGY_TEST_USERNAME") || "iggy";
const PASS = Deno.env.get("IGGY_TEST_PASSWORD") || "iggy";
const ignore = ADDRESS === "";
if (ignore) {
  console.warn("WARNING: IGGY_TEST_ADDRESS is not set; the Iggy retained tests are SKIPPED.");
}
const opts = { ignore };
const SUFFIX = crypto.randomUUID().slice(0, 8);
const MAP = `
default_stream = "mqtt_default_${SUFFIX}"
default_topic = "messages_default"
`;

function iggyEnv(id: string): Record<string, string> {
  return {
    IGGY_MQTT_GATEWAY_BACKEND: "iggy",
    IGGY_MQTT_GATEWAY_ID: id,
    IGGY_MQTT_IGGY_ADDRESS: ADDRESS,
    IGGY_MQTT_IGGY_USERNAME: USER,
    IGGY_MQTT_IGGY_PASSWORD: PASS,
    IGGY_MQTT_IGGY_RECONNECT_MAX_MS: "500",
    IGGY_MQTT_SESSION_STORE_STREAM: `mqtt_gateway_${SUFFIX}`,
    IGGY_MQTT_RETAINED_STREAM: `mqtt_gateway_${SUFFIX}`,
    IGGY_MQTT_RETAINED_POLL_INTERVAL_MS: "200",
  };
}

/** The retained messages a new subscriber of `filter` receives, as topic=payload. */
async function retainedOf(gw: TestGateway, filter: string, expect: number): Promise<string[]> {
  const got: string[] = [];
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
  c.on("message", (t, p, packet) => {
    if (packet.retain) got.push(`${t}=${new TextDecoder().decode(p)}`);
  });
  await c.subscribeAsync(filter, { qos: 1 });
  await waitFor(() => got.length >= expect, 3000, `${expect} retained of ${filter}`).catch(
    () => {},
  );
  // Barrier for "no more": a SUBSCRIBE's retained copies are queued right after its SUBACK,
  // before the next packet is read, so once the PINGRESP is in every copy is too.
  await mqttjsPing(c);
  await c.endAsync();
  return got.sort();
}

async function publish(gw: TestGateway, topic: string, payload: string): Promise<void> {
  const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
  await c.publishAsync(topic, payload, { qos: 1, retain: true });
  await c.endAsync();
}

Deno.test({
  name:
    "Iggy mode: a retained message set through gateway A reaches a new subscriber on gateway B; a clear through B is seen by A",
  ...opts,
  async fn() {
    const a = await startGateway({ env: iggyEnv("retained-a"), map: MAP });
    const b = await startGateway({ env: iggyEnv("retained-b"), map: MAP });
    try {
      await publish(a, "site/1/state", "up");
      await publish(a, "site/2/state", "down");
      // Within one poll of B's retained reader.
      await waitFor(() => b.view.retainedCount === 2, 3000, "B read A's sets");
      assert.deepEqual(await retainedOf(b, "site/+/state", 2), [
        "site/1/state=up",
        "site/2/state=down",
      ]);
      await publish(b, "site/1/state", "");
      await waitFor(() => a.view.retainedCount === 1, 3000, "A read B's clear");
      assert.deepEqual(await retainedOf(a, "site/#", 1), ["site/2/state=down"]);
    } finally {
      await a.stop();
      await b.stop();
    }
    // A gateway started afresh reads the same set from Iggy.
    const c = await startGateway({ env: iggyEnv("retained-c"), map: MAP });
    try {
      assert.deepEqual(await retainedOf(c, "#", 1), ["site/2/state=down"]);
    } finally {
      await c.stop();
    }
  },
});

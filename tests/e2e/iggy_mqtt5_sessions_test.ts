/**
 * MQTT 5 stored sessions in Iggy mode (issues 17 × 18), against a real Iggy server when
 * `IGGY_TEST_ADDRESS` is set (`IGGY_TEST_USERNAME` / `IGGY_TEST_PASSWORD`, default iggy/iggy);
 * ignored with a warning otherwise. An MQTT.js v5 client with a Session Expiry Interval keeps
 * its wildcard subscriptions, with their identifiers, in Iggy's session topic and its positions
 * as Iggy consumer offsets: it comes back through a second gateway and gets its backlog once,
 * with every matching identifier.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { startGateway, type TestGateway, waitFor } from "../helpers/gateway.ts";

const ADDRESS = Deno.env.get("IGGY_TEST_ADDRESS") ?? "";
const USER = Deno.env.get("IGGY_TEST_USERNAME") || "iggy";
const PASS = Deno.env.get("IGGY_TEST_PASSWORD") || "iggy";
const ignore = ADDRESS === "";
if (ignore) {
  console.warn("WARNING: IGGY_TEST_ADDRESS is not set; the Iggy MQTT 5 session test is SKIPPED.");
}
const opts = { ignore };
const SUFFIX = crypto.randomUUID().slice(0, 8);
const MAP = `
default_stream = "mqtt5_default_${SUFFIX}"
default_topic = "messages_default"
[[rule]]
mqtt_topic = 'building/(\\w+)/room/(\\d+)/.*'
stream = 'building5_$1_${SUFFIX}'
topic = 'telemetry'
partition_key = 'room_$2'
`;

function iggyEnv(id: string): Record<string, string> {
  return {
    IGGY_MQTT_GATEWAY_BACKEND: "iggy",
    IGGY_MQTT_GATEWAY_ID: id,
    IGGY_MQTT_IGGY_ADDRESS: ADDRESS,
    IGGY_MQTT_IGGY_USERNAME: USER,
    IGGY_MQTT_IGGY_PASSWORD: PASS,
    IGGY_MQTT_IGGY_RECONNECT_MAX_MS: "500",
    IGGY_MQTT_IGGY_REQUEST_TIMEOUT_MS: "3000",
    IGGY_MQTT_SESSION_STORE_STREAM: `mqtt_gateway5_${SUFFIX}`,
  };
}

// deno-lint-ignore no-explicit-any
type Packet = any;

/** A v5 client recording from before its CONNACK is read; resolves with the CONNACK too. */
async function connect5(gw: TestGateway, clientId: string, expiry: number) {
  const c = mqtt.connect(`mqtt://127.0.0.1:${gw.port}`, {
    protocolVersion: 5,
    clientId,
    clean: expiry === 0,
    reconnectPeriod: 0,
    properties: { sessionExpiryInterval: expiry },
  });
  const got: { payload: string; ids: number[] }[] = [];
  c.on("message", (_topic, payload, packet: Packet) => {
    const v = packet.properties?.subscriptionIdentifier;
    const ids = v === undefined ? [] : Array.isArray(v) ? [...v] : [v];
    got.push({ payload: payload.toString(), ids: ids.sort((a, b) => a - b) });
  });
  const connack: Packet = await new Promise((resolve, reject) => {
    c.once("connect", resolve);
    c.once("error", reject);
  });
  return { c, got, connack };
}

Deno.test({
  name:
    "Iggy mode, MQTT 5: a session expiry > 0 keeps wildcard subscriptions with their identifiers across gateways; the backlog comes once with every matching identifier",
  ...opts,
  async fn() {
    const north = "building/north/room/7/temp";
    const gw1 = await startGateway({ env: iggyEnv("v5-sessions-1"), map: MAP });
    try {
      const pub = await connect5(gw1, "v5-pub", 0);
      await pub.c.publishAsync(north, "create", { qos: 1 }); // the target exists
      const dev = await connect5(gw1, "v5-iggy-dev", 3600);
      assert.equal(dev.connack.sessionPresent, false);
      await dev.c.subscribeAsync("building/+/room/#", {
        qos: 1,
        properties: { subscriptionIdentifier: 21 },
      });
      await dev.c.subscribeAsync(north, { qos: 1, properties: { subscriptionIdentifier: 22 } });
      await pub.c.publishAsync(north, "live", { qos: 1 });
      await waitFor(() => dev.got.length === 1, 5000, "the live message");
      assert.deepEqual(dev.got, [{ payload: "live", ids: [21, 22] }]);
      await dev.c.endAsync();
      await waitFor(
        () => gw1.view.storedSession("v5-iggy-dev")?.offlineSinceMs != null,
        5000,
        "off",
      );
      for (let i = 0; i < 5; i++) await pub.c.publishAsync(north, `away-${i}`, { qos: 1 });
      await pub.c.endAsync();
    } finally {
      await gw1.stop();
    }
    const gw2 = await startGateway({ env: iggyEnv("v5-sessions-2"), map: MAP });
    try {
      const dev = await connect5(gw2, "v5-iggy-dev", 3600);
      assert.equal(dev.connack.sessionPresent, true, "session present through another gateway");
      await waitFor(() => dev.got.length === 5, 10_000, "the backlog");
      assert.deepEqual(
        dev.got,
        Array.from({ length: 5 }, (_, i) => ({ payload: `away-${i}`, ids: [21, 22] })),
      );
      // Barrier: an end marker on the same partition comes after any copy sent before it.
      const pub = await connect5(gw2, "v5-pub-2", 0);
      await pub.c.publishAsync(north, "end", { qos: 1 });
      await waitFor(() => dev.got.some((m) => m.payload === "end"), 10_000, "the end marker");
      assert.deepEqual(
        dev.got.map((m) => m.payload),
        [...Array.from({ length: 5 }, (_, i) => `away-${i}`), "end"],
        "once each",
      );
      await pub.c.endAsync();
      await dev.c.endAsync();
    } finally {
      await gw2.stop();
    }
  },
});

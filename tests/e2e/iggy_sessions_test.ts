/**
 * Wildcards, stored sessions and replay in Iggy mode (issue 18), against a real Iggy server
 * when `IGGY_TEST_ADDRESS` is set (`IGGY_TEST_USERNAME` / `IGGY_TEST_PASSWORD`, default
 * iggy/iggy). Without it every test here is ignored, and a warning says so. A stored session's
 * positions are Iggy consumer offsets under the client's consumer name; its subscriptions are
 * records in the session topic, so the session survives a gateway restart.
 */
import assert from "node:assert/strict";
import { connectPacket, RawClient, startGateway, waitFor } from "../helpers/gateway.ts";
import { opts as baseOpts, publishAll, receive, subscribe } from "./_subscribe_helpers.ts";
import { connectRaw } from "../helpers/gateway.ts";

const ADDRESS = Deno.env.get("IGGY_TEST_ADDRESS") ?? "";
const USER = Deno.env.get("IGGY_TEST_USERNAME") || "iggy";
const PASS = Deno.env.get("IGGY_TEST_PASSWORD") || "iggy";
const ignore = ADDRESS === "";
if (ignore) {
  console.warn("WARNING: IGGY_TEST_ADDRESS is not set; the Iggy session tests are SKIPPED.");
}
const opts = { ...baseOpts, ignore };
const SUFFIX = crypto.randomUUID().slice(0, 8);
const MAP = `
default_stream = "mqtt_default_${SUFFIX}"
default_topic = "messages_default"
[[rule]]
mqtt_topic = 'building/(\\w+)/room/(\\d+)/.*'
stream = 'building_$1_${SUFFIX}'
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
    IGGY_MQTT_SESSION_STORE_STREAM: `mqtt_gateway_${SUFFIX}`,
  };
}

/** An anonymous client's CONNECT (the gateway's anonymous rights come from the test env). */
async function connectStored(port: number, id: string) {
  const c = await RawClient.connect(port);
  await c.send(connectPacket(id, { clean: false }));
  const ack = await c.readPacket();
  assert.ok(ack !== null && ack[0] === 0x20, "CONNACK");
  return { c, present: ack[2], code: ack[3] };
}

Deno.test({
  name: "Iggy mode: a stored session misses 50 QoS 1 messages and gets all 50 after a gateway " +
    "restart; wildcard and replay filters work against Iggy's listing and polls",
  ...opts,
  async fn() {
    const room = `building/north/room/42/temp`;
    const gw1 = await startGateway({ env: iggyEnv("sessions-1"), map: MAP });
    try {
      const pub = await connectRaw(gw1.port, "pub");
      await publishAll(pub, [[room, "before"], ["building/south/room/1/t", "s"]]);
      const first = await connectStored(gw1.port, "iggy-dev");
      assert.deepEqual([first.present, first.code], [0, 0]);
      assert.deepEqual(await subscribe(first.c, [[room, 1], ["building/+/room/#", 1]]), [1, 1]);
      const replay = await connectRaw(gw1.port, "replayer");
      assert.deepEqual(await subscribe(replay, [[`$replay/earliest/${room}`, 1]]), [1]);
      assert.deepEqual((await receive(replay, 1)).map((m) => m.payload), ["before"]);
      replay.close();
      await publishAll(pub, [["building/south/room/1/t", "live"]], 5);
      assert.deepEqual((await receive(first.c, 1)).map((m) => m.payload), ["live"]);
      // A stream created after the SUBSCRIBE (Iggy 0.9 confirms without offsets).
      await publishAll(pub, [["building/east/room/5/t", "new stream"]], 7);
      assert.deepEqual((await receive(first.c, 1)).map((m) => m.payload), ["new stream"]);
      first.c.close();
      await waitFor(
        () => gw1.view.storedSession("iggy-dev")?.offlineSinceMs != null,
        5000,
        "off",
      );
      const missed: [string, string][] = Array.from({ length: 50 }, (_, i) => [room, `m${i}`]);
      await publishAll(pub, missed, 10);
      pub.close();
    } finally {
      await gw1.stop();
    }
    const gw2 = await startGateway({ env: iggyEnv("sessions-2"), map: MAP });
    try {
      const again = await connectStored(gw2.port, "iggy-dev");
      assert.deepEqual([again.present, again.code], [1, 0], "session present after restart");
      const got = await receive(again.c, 50, { timeoutMs: 10_000 });
      assert.deepEqual(got.map((m) => m.payload), Array.from({ length: 50 }, (_, i) => `m${i}`));
      again.c.close();
    } finally {
      await gw2.stop();
    }
  },
});

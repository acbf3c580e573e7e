/**
 * Wildcards, stored sessions and replay in Iggy mode (issue 18), against a real Iggy server
 * when `IGGY_TEST_ADDRESS` is set (`IGGY_TEST_USERNAME` / `IGGY_TEST_PASSWORD`, default
 * iggy/iggy). Without it every test here is ignored, and a warning says so. A stored session's
 * positions are Iggy consumer offsets under the client's consumer name; its subscriptions are
 * records in the session topic, so the session survives a gateway restart.
 */
import assert from "node:assert/strict";
import {
  connectPacket,
  RawClient,
  startGateway,
  type TestGateway,
  waitFor,
} from "../helpers/gateway.ts";
import { sessionConsumer } from "../../src/session/stored_sessions.ts";
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

Deno.test({
  name: "Iggy mode: 200 sessions stored under expiry_s 86,400 expire at the first sweep after a " +
    "restart with 1 (one line, counted); their consumer offsets are deleted in Iggy; a returning " +
    "id gets present 0; at max_stored_sessions the session offline the longest is evicted",
  ...opts,
  async fn() {
    const N = 200;
    const room = "building/west/room/7/temp";
    const id = (i: number) => `x-${SUFFIX}-${i}`;
    const env = (gateway: string, more: Record<string, string>) => ({
      ...iggyEnv(gateway),
      ...more,
    });
    const offline = (gw: TestGateway, i: number) =>
      gw.view.storedSession(id(i))?.offlineSinceMs != null;
    const gw1 = await startGateway({
      env: env("expiry-1", { IGGY_MQTT_SESSION_EXPIRY_S: "86400" }),
      map: MAP,
    });
    let triple = { stream: "", topic: "", partition: 0 };
    let lastOffline = 0;
    try {
      const pub = await connectRaw(gw1.port, "pub-expiry");
      await publishAll(pub, [[room, "before"]]); // a position past 0 is stored at SUBSCRIBE
      pub.close();
      for (let i = 0; i < N; i++) {
        const s = await connectStored(gw1.port, id(i));
        assert.deepEqual([s.present, s.code], [0, 0]);
        assert.deepEqual(await subscribe(s.c, [[room, 1]]), [1]);
        s.c.close();
      }
      const all = [...Array(N).keys()];
      await waitFor(() => all.every((i) => offline(gw1, i)), 30_000, "every session offline");
      const view = gw1.view;
      lastOffline = Math.max(...all.map((i) => view.storedSession(id(i))!.offlineSinceMs!));
      const [key] = view.storedSession(id(0))!.triples;
      const [stream, topic, partition] = key.split("\u0000");
      triple = { stream, topic, partition: Number(partition) };
      await waitFor(
        async () => await gw1.view.log.getOffset(sessionConsumer(id(N - 1)), triple) !== null,
        10_000,
        "the last position stored",
      );
    } finally {
      await gw1.stop();
    }
    await waitFor(() => Date.now() - lastOffline > 1000, 5000, "a second offline");
    const gw2 = await startGateway({
      env: env("expiry-2", {
        IGGY_MQTT_SESSION_EXPIRY_S: "1",
        IGGY_MQTT_LIMITS_MAX_STORED_SESSIONS: "2",
      }),
      map: MAP,
    });
    try {
      await waitFor(() => gw2.view.metrics.storedSessionsExpired.get() >= N, 10_000, "expired");
      const lines = gw2.logs.map((l) => JSON.parse(l)).filter((l) =>
        l.msg === "Stored sessions expired"
      );
      assert.equal(lines.length, 1, "one sweep, one line");
      assert.ok(lines[0].count >= N, "this test's sessions and the one before's");
      await gw2.view.storedSessionsIdle();
      for (let i = 0; i < N; i += 13) {
        const row = await gw2.view.log.getOffset(sessionConsumer(id(i)), triple);
        assert.equal(row, null, `${id(i)}'s consumer offset is deleted`);
      }
      const back = await connectStored(gw2.port, id(5));
      assert.deepEqual([back.present, back.code], [0, 0], "a returning id: session present 0");
      back.c.close();
      // max_stored_sessions 2: a third stored session evicts the one offline the longest.
      await waitFor(() => offline(gw2, 5), 5000, "5 offline");
      const other = await connectStored(gw2.port, id(6));
      other.c.close();
      await waitFor(() => offline(gw2, 6), 5000, "6 offline");
      const third = await connectStored(gw2.port, id(7));
      assert.deepEqual([third.present, third.code], [0, 0]);
      third.c.close();
      assert.equal(gw2.view.metrics.storedSessionsEvicted.get(), 1);
      const stored = [5, 6, 7].filter((i) => gw2.view.storedSession(id(i)) !== undefined);
      assert.deepEqual([stored, gw2.view.storedSessionCount], [[6, 7], 2], "5 was evicted");
    } finally {
      await gw2.stop();
    }
  },
});

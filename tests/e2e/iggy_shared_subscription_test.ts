/**
 * Shared subscriptions across gateways (issue 39), against a real Iggy server when
 * `IGGY_TEST_ADDRESS` is set (`IGGY_TEST_USERNAME` / `IGGY_TEST_PASSWORD`, default iggy/iggy);
 * ignored with a warning otherwise. Two gateways on one Iggy with members of one group on both:
 * Iggy's consumer group splits the topic's partitions between the gateways, so every message is
 * handled once; when one gateway stops, its partitions move to the other, which deals them from
 * the group's stored position: none is lost.
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
  console.warn(
    "WARNING: IGGY_TEST_ADDRESS is not set; the Iggy shared subscription tests are SKIPPED.",
  );
}
const opts = { ignore };

function setup() {
  const suffix = crypto.randomUUID().slice(0, 8);
  const map = `
default_stream = "mqtt_default_${suffix}"
default_topic = "messages_default"
[[rule]]
mqtt_topic = 'work/([^/]+)'
stream = 'share_${suffix}'
topic = 'jobs'
partition_key = 'k$1'
`;
  const env = (id: string): Record<string, string> => ({
    IGGY_MQTT_GATEWAY_BACKEND: "iggy",
    IGGY_MQTT_GATEWAY_ID: id,
    IGGY_MQTT_IGGY_ADDRESS: ADDRESS,
    IGGY_MQTT_IGGY_USERNAME: USER,
    IGGY_MQTT_IGGY_PASSWORD: PASS,
    IGGY_MQTT_IGGY_RECONNECT_MAX_MS: "500",
    IGGY_MQTT_LOG_AUTO_CREATE_PARTITIONS: "4",
    IGGY_MQTT_SESSION_STORE_STREAM: `mqtt_gateway_${suffix}`,
    IGGY_MQTT_RETAINED_STREAM: `mqtt_gateway_${suffix}`,
  });
  return { map, env };
}

/** A member of `$share/g/work/+` that acknowledges everything; what it got, as payloads. */
async function member(gw: TestGateway, id: string) {
  const got: string[] = [];
  const c = mqtt.connect(`mqtt://127.0.0.1:${gw.port}`, {
    clientId: id,
    protocolVersion: 5,
    reconnectPeriod: 0,
  });
  c.on("message", (_t, p) => got.push(new TextDecoder().decode(p)));
  await new Promise((r) => c.once("connect", r));
  await c.subscribeAsync("$share/g/work/+", { qos: 1 });
  return { c, got };
}

async function publishRange(gw: TestGateway, from: number, to: number): Promise<void> {
  const p = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
  for (let i = from; i < to; i++) {
    await p.publishAsync(`work/${i % 20}`, `m${i}`, { qos: 1 });
  }
  await p.endAsync();
}

/** The partitions the gateways deal to the group: a split, none twice. */
function owned(gw: TestGateway): number {
  return gw.view.sharePartitionsOwned;
}

Deno.test({
  name:
    "Iggy mode, two gateways with members of one share group: Iggy's consumer group splits the partitions, every message is handled once",
  ...opts,
  async fn() {
    const { map, env } = setup();
    // The topic exists with its 4 partitions before the group splits them.
    const a = await startGateway({ env: env("share-a"), map });
    const b = await startGateway({ env: env("share-b"), map });
    const members: { c: mqtt.MqttClient; got: string[] }[] = [];
    try {
      await publishRange(a, 0, 1);
      members.push(await member(a, "a1"));
      // Alone, A deals every partition the filter reads (work/+ reads two topics here).
      await waitFor(() => owned(a) > 0, 5000, "A's partitions");
      const all = owned(a);
      members.push(await member(a, "a2"), await member(b, "b1"));
      await waitFor(() => owned(a) + owned(b) === all && owned(b) > 0, 5000, "split");
      await publishRange(a, 1, 401);
      const dealt = () => members.flatMap((m) => m.got);
      await waitFor(() => dealt().length >= 400, 15_000, "400 messages");
      // Barrier for "none twice": nothing in flight at either gateway, then a PINGRESP on every
      // member, so any copy written before has been read.
      await waitFor(() => a.view.settled() && b.view.settled(), 5000, "every copy acknowledged");
      for (const m of members) await mqttjsPing(m.c);
      const got = dealt();
      assert.equal(got.length, 400, "no message twice");
      assert.equal(new Set(got).size, 400);
      const onB = members[2].got.length;
      assert.ok(onB > 0 && onB < 400, `B's member got ${onB}: the split is real`);
    } finally {
      for (const m of members) await m.c.endAsync().catch(() => {});
      await b.stop();
      await a.stop();
    }
  },
});

Deno.test({
  name:
    "Iggy mode, share group on two gateways: stopping one moves its partitions to the other with 0 lost",
  ...opts,
  async fn() {
    const { map, env } = setup();
    const a = await startGateway({ env: env("share-a"), map });
    const b = await startGateway({ env: env("share-b"), map });
    const members: { c: mqtt.MqttClient; got: string[] }[] = [];
    try {
      await publishRange(a, 0, 1);
      members.push(await member(a, "a1"));
      await waitFor(() => owned(a) > 0, 5000, "A's partitions");
      const all = owned(a);
      members.push(await member(b, "b1"));
      await waitFor(() => owned(a) + owned(b) === all && owned(b) > 0, 5000, "split");
      await publishRange(a, 1, 201);
      await waitFor(
        () => members[0].got.length + members[1].got.length >= 200,
        15_000,
        "first 200",
      );
      const publishing = publishRange(a, 201, 601); // while B stops
      await b.stop();
      await publishing;
      await waitFor(() => owned(a) === all, 5000, "A took B's partitions");
      const want = Array.from({ length: 600 }, (_, i) => `m${i + 1}`).slice(0, 600);
      const seen = () => new Set(members.flatMap((m) => m.got));
      await waitFor(
        () => want.every((m) => seen().has(m)),
        15_000,
        "every message after the hand-over",
      ).catch(() => {});
      const missing = want.filter((m) => !seen().has(m));
      assert.deepEqual(missing.slice(0, 10), [], `${missing.length} lost`);
      const total = members.flatMap((m) => m.got).length;
      console.log(
        `hand-over: ${total - 600} duplicates, ${a.view.metrics.shareHandover.get()} dealt again`,
      );
    } finally {
      for (const m of members) await m.c.endAsync().catch(() => {});
      await b.stop();
      await a.stop();
    }
  },
});

Deno.test({
  name:
    "Iggy mode: a share group whose only member has a stored session keeps its position in the log; the member back gets everything published meanwhile",
  ...opts,
  async fn() {
    const { map, env } = setup();
    const a = await startGateway({ env: env("share-a"), map });
    const options = {
      clientId: "stored-member",
      protocolVersion: 5 as const,
      clean: false,
      reconnectPeriod: 0,
      properties: { sessionExpiryInterval: 600 },
    };
    try {
      await publishRange(a, 0, 1);
      const first = await mqtt.connectAsync(`mqtt://127.0.0.1:${a.port}`, options);
      await first.subscribeAsync("$share/g/work/+", { qos: 1 });
      await waitFor(() => owned(a) > 0, 5000, "A's partitions");
      await first.endAsync();
      await waitFor(() => owned(a) === 0, 5000, "the group left the log's consumer group");
      await publishRange(a, 1, 51);
      const got: string[] = [];
      const back = mqtt.connect(`mqtt://127.0.0.1:${a.port}`, options);
      back.on("message", (_t, p) => got.push(new TextDecoder().decode(p)));
      await waitFor(() => new Set(got).size >= 50, 10_000, "the 50 published meanwhile");
      assert.deepEqual(
        [...new Set(got)].sort(),
        Array.from({ length: 50 }, (_, i) => `m${i + 1}`).sort(),
      );
      await back.endAsync();
    } finally {
      await a.stop();
    }
  },
});

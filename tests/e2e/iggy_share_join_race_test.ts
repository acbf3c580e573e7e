/**
 * Two members of one `$share` group subscribing on one gateway at the same moment (their
 * SUBSCRIBEs sent in the same tick, over and over, a new group each time): the group's split
 * between gateways (`share/spread.ts`, over Iggy's consumer groups) is started once, whichever
 * member's subscribe finishes first, so the group deals its partitions and a message published
 * to it reaches one member. Needs a real Iggy (`IGGY_TEST_ADDRESS`, `IGGY_TEST_USERNAME` /
 * `IGGY_TEST_PASSWORD`, default iggy/iggy); skipped loudly otherwise: the fake Iggy has no
 * consumer groups, and without them a group is not split (nothing to start).
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { startGateway, waitFor } from "../helpers/gateway.ts";

const ADDRESS = Deno.env.get("IGGY_TEST_ADDRESS") ?? "";
const USER = Deno.env.get("IGGY_TEST_USERNAME") || "iggy";
const PASS = Deno.env.get("IGGY_TEST_PASSWORD") || "iggy";
if (ADDRESS === "") {
  console.warn(
    "WARNING: IGGY_TEST_ADDRESS is not set; the concurrent $share joins on a real Iggy are SKIPPED.",
  );
}
const PARTITIONS = 3;
/** `jobs/+` reads the rule's topic and the default one (see iggy_share_spread_test.ts). */
const READ = 2 * PARTITIONS;
const ROUNDS = 25;

Deno.test({
  name:
    `$share on Iggy: two members subscribing in the same tick start the group's split once, ${ROUNDS} groups in a row: each deals every partition and delivers to one member`,
  ignore: ADDRESS === "",
  async fn() {
    const suffix = crypto.randomUUID().slice(0, 8);
    const gw = await startGateway({
      env: {
        IGGY_MQTT_GATEWAY_BACKEND: "iggy",
        IGGY_MQTT_GATEWAY_ID: `share-race-${suffix}`,
        IGGY_MQTT_IGGY_ADDRESS: ADDRESS,
        IGGY_MQTT_IGGY_USERNAME: USER,
        IGGY_MQTT_IGGY_PASSWORD: PASS,
        IGGY_MQTT_LOG_AUTO_CREATE_PARTITIONS: String(PARTITIONS),
        IGGY_MQTT_SESSION_STORE_STREAM: `race_sessions_${suffix}`,
        IGGY_MQTT_RETAINED_STREAM: `race_retained_${suffix}`,
      },
      map: `
default_stream = "race_default_${suffix}"
default_topic = "other"
[[rule]]
mqtt_topic = 'jobs/.*'
stream = 'race_${suffix}'
topic = 'jobs'
`,
    });
    const clients: mqtt.MqttClient[] = [];
    const connect = async () => {
      const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
      clients.push(c);
      return c;
    };
    try {
      const pub = await connect();
      await pub.publishAsync("jobs/0", "create", { qos: 1 }); // the topics exist
      // A plain subscriber keeps the shared readers of the triples: each member's subscribe then
      // waits on nothing but promises already settled, and two that start together finish
      // together.
      await (await connect()).subscribeAsync("jobs/+", { qos: 0 });
      for (let round = 0; round < ROUNDS; round++) {
        const group = `race${round}`;
        const [a, b] = [await connect(), await connect()];
        const got: string[] = [];
        for (const c of [a, b]) c.on("message", (_t, p) => got.push(new TextDecoder().decode(p)));
        // Both SUBSCRIBEs leave in this tick.
        await Promise.all(
          [a, b].map((c) => c.subscribeAsync(`$share/${group}/jobs/+`, { qos: 1 })),
        );
        const dealt = () =>
          gw.view.shareGroups().filter((s) => s.group === `${group}/jobs/+`)
            .reduce((n, s) => n + (s.partitions ?? 0), 0);
        await waitFor(() => dealt() === READ, 5000, `round ${round}: the group deals`).catch(
          (e) => {
            throw new Error(`${e.message}: ${dealt()} of ${READ} partitions`);
          },
        );
        await pub.publishAsync(`jobs/${round}`, `m${round}`, { qos: 1 });
        await waitFor(() => got.length > 0, 5000, `round ${round}: a member gets the message`);
        assert.deepEqual(got, [`m${round}`]);
        await a.endAsync();
        await b.endAsync();
      }
    } finally {
      for (const c of clients) await c.endAsync().catch(() => {});
      await gw.stop();
    }
  },
});

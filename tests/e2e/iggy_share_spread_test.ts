/**
 * A share group split between three gateways on one real Iggy (`share/spread.ts` over Iggy's
 * consumer groups): after a member gateway restarts (it leaves the log's group, the other two
 * take its partitions, it joins again and Iggy moves one partition back to it), every partition
 * of the topic is dealt by exactly one gateway again within the bound: the sum of the partitions
 * the gateways deal equals the topic's partitions, and each gateway deals what Iggy's consumer
 * group gives it. Needs a real Iggy (`IGGY_TEST_ADDRESS`, `IGGY_TEST_USERNAME` /
 * `IGGY_TEST_PASSWORD`, default iggy/iggy); skipped loudly otherwise: the fake Iggy has no
 * consumer groups.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { startGateway, type TestGateway, waitFor } from "../helpers/gateway.ts";
import { SYNC_MS } from "../../src/delivery/share/spread.ts";

const ADDRESS = Deno.env.get("IGGY_TEST_ADDRESS") ?? "";
const USER = Deno.env.get("IGGY_TEST_USERNAME") || "iggy";
const PASS = Deno.env.get("IGGY_TEST_PASSWORD") || "iggy";
if (ADDRESS === "") {
  console.warn(
    "WARNING: IGGY_TEST_ADDRESS is not set; the share split on a real Iggy is SKIPPED.",
  );
}
/** The topics' partitions (`log.auto_create_partitions`). */
const PARTITIONS = 3;
/**
 * Partitions the group reads: `jobs/+` may also match the default topic (as any filter the rules
 * do not cover for sure), so it reads two topics of {@link PARTITIONS} each.
 */
const READ = 2 * PARTITIONS;
/**
 * A rebalance is followed within three of the spread's syncs: the gainer sees the move at its
 * next one, deals it from the first one the hold has passed; the loser stops at its next one.
 */
const BOUND_MS = 3 * SYNC_MS + 500;

function gatewayOn(id: string, suffix: string): Promise<TestGateway> {
  return startGateway({
    env: {
      IGGY_MQTT_GATEWAY_BACKEND: "iggy",
      IGGY_MQTT_GATEWAY_ID: id,
      IGGY_MQTT_IGGY_ADDRESS: ADDRESS,
      IGGY_MQTT_IGGY_USERNAME: USER,
      IGGY_MQTT_IGGY_PASSWORD: PASS,
      IGGY_MQTT_LOG_AUTO_CREATE_PARTITIONS: String(PARTITIONS),
      IGGY_MQTT_SESSION_STORE_STREAM: `share_sessions_${suffix}`,
      IGGY_MQTT_RETAINED_STREAM: `share_retained_${suffix}`,
    },
    map: `
default_stream = "share_default_${suffix}"
default_topic = "other"
[[rule]]
mqtt_topic = 'jobs/.*'
stream = 'share_${suffix}'
topic = 'jobs'
`,
  });
}

/** Partitions of the group each gateway deals. */
function dealt(gws: TestGateway[]): number[] {
  return gws.map((g) =>
    g.view.shareGroups().filter((s) => s.group === "workers/jobs/+")
      .reduce((n, s) => n + (s.partitions ?? 0), 0)
  );
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/** Samples the gateways' counts every 10 ms: how long more partitions than there are were dealt. */
class Sampler {
  overMs = 0;
  last: number[] = [];
  #at = performance.now();
  readonly #timer: ReturnType<typeof setInterval>;
  constructor(readonly gws: (TestGateway | null)[]) {
    this.#timer = setInterval(() => this.#sample(), 10);
  }
  #sample(): void {
    const now = performance.now();
    if (sum(this.last) > READ) this.overMs += now - this.#at; // the stretch since the last sample
    this.#at = now;
    this.last = dealt(this.gws.filter((g) => g !== null));
  }
  stop(): void {
    clearInterval(this.#timer);
  }
}

Deno.test({
  name:
    "share group across three gateways on Iggy: after a member gateway restarts, every partition is dealt by exactly one gateway within the bound",
  ignore: ADDRESS === "",
  async fn() {
    const suffix = crypto.randomUUID().slice(0, 8);
    const gws: (TestGateway | null)[] = [];
    const clients: mqtt.MqttClient[] = [];
    const member = async (gw: TestGateway) => {
      const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
      await c.subscribeAsync("$share/workers/jobs/+", { qos: 1 });
      clients.push(c);
    };
    const oneEach = () => JSON.stringify(dealt(gws as TestGateway[])) === "[2,2,2]";
    let sampler: Sampler | null = null;
    try {
      for (let i = 0; i < 3; i++) gws.push(await gatewayOn(`share-gw${i}-${suffix}`, suffix));
      const pub = await mqtt.connectAsync(`mqtt://127.0.0.1:${gws[0]!.port}`, {
        reconnectPeriod: 0,
      });
      clients.push(pub);
      await pub.publishAsync("jobs/0", "create", { qos: 1 }); // the topic exists
      for (const gw of gws) await member(gw!);
      await waitFor(oneEach, 10_000, "one partition of each topic each").catch((e) => {
        throw new Error(`${e.message}: ${JSON.stringify(dealt(gws as TestGateway[]))}`);
      });
      const figures: string[] = [];
      for (let round = 0; round < 3; round++) {
        const i = round % 3;
        sampler = new Sampler(gws);
        const gw = gws[i]!;
        gws[i] = null;
        await gw.stop(); // leaves the log's groups: the other two deal its partitions
        const left = gws.filter((g) => g !== null);
        await waitFor(() => sum(dealt(left)) === READ, 10_000, "two take the third's")
          .catch((e) => {
            throw new Error(`${e.message}: ${JSON.stringify(dealt(left))}`);
          });
        const back = await gatewayOn(`share-gw${i}-${suffix}`, suffix);
        gws[i] = back;
        // Joins the log's groups: Iggy moves a partition of each topic to it at once.
        await member(back);
        const joined = performance.now();
        await waitFor(oneEach, BOUND_MS, "one partition of each topic each").catch((e) => {
          throw new Error(`round ${round}: ${e.message}: ${JSON.stringify(sampler!.last)}`);
        });
        const settledMs = Math.round(performance.now() - joined);
        sampler.stop();
        figures.push(`${settledMs} ms to settle, ${Math.round(sampler.overMs)} ms dealt twice`);
        assert.equal(
          Math.round(sampler.overMs),
          0,
          `round ${round}: a partition dealt by two gateways for ${sampler.overMs} ms`,
        );
      }
      console.log(`share split after each restart: ${figures.join("; ")}`);
    } finally {
      sampler?.stop();
      for (const c of clients) await c.endAsync().catch(() => {});
      for (const g of gws) await g?.stop();
    }
  },
});

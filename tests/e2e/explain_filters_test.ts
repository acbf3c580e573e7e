/**
 * `explain` over a live embedded store (opened read-only beside the running gateway): a topic
 * names its partition (the key's hash over the topic's partitions), a wildcard filter lists
 * the triples SUBSCRIBE resolves it to, and a filter over more triples than
 * `limits.max_triples_per_subscription` says SUBSCRIBE would refuse it.
 *
 * @module
 */
import assert from "node:assert/strict";
import { removeStore } from "../helpers/store.ts";
import mqtt from "mqtt";
import { startGateway } from "../helpers/gateway.ts";
import { cli, ROOT } from "../helpers/cli.ts";
import { partitionForKey } from "../../src/mapping/mod.ts";

Deno.test("explain names partitions and lists a wildcard filter's triples from the store", async () => {
  // Inside ./data: the CLI's permission set reads stores there.
  const store = `data/explain-${crypto.randomUUID()}.db`;
  const env = { IGGY_MQTT_EMBEDDED_PATH: store };
  const gw = await startGateway({ env });
  try {
    const c = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, { reconnectPeriod: 0 });
    for (const t of ["building/north/room/1/t", "building/south/room/2/t", "sensors/s1/data"]) {
      await c.publishAsync(t, "21.5", { qos: 1 });
    }
    await c.endAsync();

    const r = await cli(["explain", "--json", "sensors/s1/data", "building/+/room/#"], { env });
    assert.equal(r.code, 0, r.stderr);
    const [topic, filter] = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(topic, {
      topic: "sensors/s1/data",
      rule: 2,
      stream: "sensors",
      iggy_topic: "sensor_data",
      partition_key: "sensor_s1",
      partitions: 3,
      partition: partitionForKey("sensor_s1", 3),
      exists: true,
    });
    assert.equal(filter.topic, "building/+/room/#");
    assert.deepEqual(filter.targets, [
      { rule: 1, stream: "building_*", iggy_topic: "telemetry", partition_key: null },
      { rule: null, stream: "sensors", iggy_topic: "messages_default", partition_key: null },
    ]);
    // Both building streams' three partitions; the default topic was never created.
    assert.deepEqual(
      filter.triples.map((t: { stream: string; partition: number }) =>
        `${t.stream}:${t.partition}`
      ),
      ["building_north:0", "building_north:1", "building_north:2"]
        .concat(["building_south:0", "building_south:1", "building_south:2"]),
    );
    assert.equal(filter.max_triples, gw.config.limits.max_triples_per_subscription);

    const text = await cli(["explain", "building/+/room/#", "sensors/s1/data"], { env });
    assert.match(
      text.stdout,
      /^building\/\+\/room\/# → a filter over rule 1: building_\* \/ telemetry; default: sensors \/ messages_default$/m,
    );
    assert.match(
      text.stdout,
      /^ {2}reads 6 triple\(s\) \(at most \d+, limits\.max_triples_per_subscription\):$/m,
    );
    assert.match(text.stdout, /^ {2}building_south \/ telemetry partition 2$/m);
    assert.match(
      text.stdout,
      /^sensors\/s1\/data → stream "sensors", topic "sensor_data", key "sensor_s1", partition \d of 3 \(rule 2\)$/m,
    );

    const bound = await cli(["explain", "building/#"], {
      env: { ...env, IGGY_MQTT_LIMITS_MAX_TRIPLES_PER_SUBSCRIPTION: "4" },
    });
    assert.match(
      bound.stdout,
      /^ {2}SUBSCRIBE would be refused \(reason 0x97\): resolves to more than 4 triples \(max_triples_per_subscription\)$/m,
    );
  } finally {
    await gw.stop();
    await removeStore(`${ROOT}${store}`);
  }
});

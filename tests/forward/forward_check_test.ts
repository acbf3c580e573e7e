/**
 * `check` in forward mode prints the forward plan: where the upstream is, the batch and disk
 * settings, and for each target what exists upstream (on the fake Iggy) or would be created.
 */
import assert from "node:assert/strict";
import { cli } from "../helpers/cli.ts";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";

Deno.test("check prints the forward plan: existing, missing and repartitioned targets", async () => {
  const store = new FakeStore();
  const sensors = store.createStream("sensors");
  store.createTopic(sensors, "sensor_data", 6, new Uint8Array());
  const node = new FakeNode({ dialect: "0.11", store });
  const address = node.listen();
  const dir = await Deno.makeTempDir();
  try {
    const { code, stdout } = await cli(["check"], {
      env: {
        IGGY_MQTT_FORWARD_ENABLED: "true",
        IGGY_MQTT_IGGY_ADDRESS: address,
        IGGY_MQTT_IGGY_PROTOCOL: "0.11",
        IGGY_MQTT_IGGY_PASSWORD: "iggy",
        IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db`,
      },
    });
    assert.equal(code, 0, stdout);
    assert.match(
      stdout,
      new RegExp(`forward: every message of the embedded log to Iggy at ${address}`),
    );
    assert.match(stdout, /store full \(embedded.max_store_bytes \d+\): refuse/);
    assert.match(
      stdout,
      /sensors\/sensor_data \(3 partitions\) → upstream 6 partitions, partition p → p mod 6/,
    );
    assert.match(
      stdout,
      /sensors\/messages_default \(3 partitions\) → missing upstream: created with 3 partitions, fsync/,
    );
  } finally {
    await node.close();
    await Deno.remove(dir, { recursive: true });
  }
});

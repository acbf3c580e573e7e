import assert from "node:assert/strict";
import { compileMap } from "./compile.ts";
import { constantTargets } from "./targets.ts";

Deno.test("constantTargets(): the default and the rules without captures, each once", () => {
  const map = compileMap(
    `default_stream = "sensors"
default_topic = "messages_default"
[[rule]]
mqtt_topic = 'building/(\\w+)/room/(\\d+)/.*'
stream = 'building_$1'
topic = 'telemetry'
[[rule]]
mqtt_topic = 'sensors/([^/]+)/data'
stream = 'sensors'
topic = 'sensor_data'
partition_key = 'sensor_$1'
[[rule]]
mqtt_topic = 'other/([^/]+)'
stream = 'sensors'
topic = 'sensor_data'
[[rule]]
mqtt_topic = 'cost/.*'
stream = 'money'
topic = 'usd$$'
`,
    "m.toml",
  );
  assert.deepEqual(constantTargets(map), [
    { stream: "sensors", topic: "messages_default" },
    { stream: "sensors", topic: "sensor_data" },
    { stream: "money", topic: "usd$" },
  ]);
});

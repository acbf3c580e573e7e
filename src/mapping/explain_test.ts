import assert from "node:assert/strict";
import { compileMap } from "./compile.ts";
import { explainJson } from "./explain.ts";

const map = compileMap(
  `default_stream = "sensors"
default_topic = "messages_default"
[[rule]]
mqtt_topic = 'building/(\\w+)/room/(\\d+)/.*'
stream = 'building_$1'
topic = 'telemetry'
partition_key = 'room_$2'
`,
  "config/topic-map.toml",
);

Deno.test("explainJson() shapes a matched topic as an explain --json line", () => {
  assert.equal(
    JSON.stringify(explainJson(map, "building/north/room/42/temp")),
    '{"topic":"building/north/room/42/temp","rule":1,"stream":"building_north",' +
      '"iggy_topic":"telemetry","partition_key":"room_42"}',
  );
});

Deno.test("explainJson() shows rule and key as null when no rule matches", () => {
  assert.deepEqual(explainJson(map, "weather"), {
    topic: "weather",
    rule: null,
    stream: "sensors",
    iggy_topic: "messages_default",
    partition_key: null,
  });
});

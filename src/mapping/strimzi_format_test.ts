import assert from "node:assert/strict";
import { compileMap } from "./compile.ts";
import { MapError } from "./map_error.ts";
import { resolveTopic } from "./resolve.ts";

const FIXTURE = "tests/fixtures/strimzi-topic-mapping-rules.json";

async function loadFixture(options?: { defaultStream?: string; defaultTopic?: string }) {
  const text = await Deno.readTextFile(new URL(`../../${FIXTURE}`, import.meta.url));
  return compileMap(text, FIXTURE, options);
}

// Every example resolution the Strimzi MQTT bridge README gives for its five example rules.
// The fixture writes rule 4's word boundaries as "\\b": the README's "\b" is a JSON backspace
// (see the refusal test below).
const README_EXAMPLES: [string, number | null, string, string | null][] = [
  ["building/A/room/1003/floor/2", 1, "building_A", "room_1003"],
  ["sensors/temperature/data", 2, "sensor_data", null],
  ["sensors/temperature/living-room", 3, "sensor_others", null],
  ["sensors", 3, "sensor_others", null],
  ["sensorsdata", 3, "sensor_others", null],
  ["devices/thermostat/data/all", 4, "device_thermostat_data", "device_all"],
  ["locations/city/luanda/angola", 5, "locations", "location_city"],
  ["locations/city", 5, "locations", "location_city"],
  ["locations/city/", 5, "locations", "location_city"],
  // No rule matches: Strimzi's default topic, no key.
  ["building/A/room/12345/x", null, "messages_default", null], // \d{1,4}
  ["devices/thermostat/data/some", null, "messages_default", null],
  ["locationsdata", null, "messages_default", null],
];

Deno.test("compileMap() reads the Strimzi README example rules into five rules", async () => {
  const map = await loadFixture();
  assert.equal(map.rules.length, 5);
  assert.equal(map.defaultStream, "sensors");
  assert.equal(map.defaultTopic, "messages_default");
  assert.deepEqual(map.rules.map((r) => r.partitionKey), [
    "room_$2",
    null,
    null,
    "device_$2",
    "location_$1",
  ]);
});

Deno.test("resolveTopic() resolves every Strimzi README example as the README says", async () => {
  const map = await loadFixture();
  for (const [topic, rule, iggyTopic, key] of README_EXAMPLES) {
    assert.deepEqual(
      resolveTopic(map, topic),
      { rule, stream: "sensors", topic: iggyTopic, partitionKey: key },
      topic,
    );
  }
});

Deno.test("compileMap() takes a Strimzi map's stream and default topic from options", async () => {
  const map = await loadFixture({ defaultStream: "plant_7", defaultTopic: "unmapped" });
  assert.deepEqual(resolveTopic(map, "sensors/t/data"), {
    rule: 2,
    stream: "plant_7",
    topic: "sensor_data",
    partitionKey: null,
  });
  assert.equal(resolveTopic(map, "x").topic, "unmapped");
});

Deno.test("compileMap() keeps a $ in a Strimzi default stream literal", () => {
  const map = compileMap('[{"mqttTopic": "a/([^/]+)", "kafkaTopic": "t"}]', "m.json", {
    defaultStream: "s$1",
  });
  assert.equal(resolveTopic(map, "a/b").stream, "s$1");
});

Deno.test("compileMap() refuses the README's rule 4 copied verbatim, where \\b is a backspace", () => {
  const verbatim =
    '[{"mqttTopic": "devices/([^/]+)/data/(\\b(all|new|old)\\b)", "kafkaTopic": "device_$1_data"}]';
  assert.throws(() => compileMap(verbatim, "rules.json"), (e: unknown) => {
    assert.ok(e instanceof MapError);
    assert.equal(e.rule, 1);
    assert.equal(e.key, "mqttTopic");
    assert.match(
      e.message,
      /^rules\.json: rule 1 \(mqttTopic\): pattern contains control character U\+0008/,
    );
    return true;
  });
});

Deno.test("compileMap() refuses the README's invalid (.*) capture example in Strimzi JSON", () => {
  const text = '[{"mqttTopic": "building/(\\\\w+)/room/(\\\\d{1,4})/(.*)", "kafkaTopic": "b_$1"}]';
  assert.throws(() => compileMap(text, "rules.json"), /rule 1 \(mqttTopic\): capture group 3/);
});

Deno.test("compileMap() names Strimzi keys in refusals", () => {
  const cases: [string, RegExp][] = [
    [
      '[{"mqttTopic": "a/(\\\\w+)", "kafkaTopic": "t", "kafkaKey": "k_$2"}]',
      /rule 1 \(kafkaKey\): "\$2"/,
    ],
    ['[{"mqttTopic": "a"}]', /rule 1 \(kafkaTopic\): is missing/],
    [
      '[{"mqttTopic": "a", "kafkaTopic": "t", "kafkaPartition": 1}]',
      /rule 1 \(kafkaPartition\): unknown key/,
    ],
    ['["a"]', /rule 1 \(rule\): must be an object/],
    ['{"mqttTopic": "a"}', /r\.json: file: must be a JSON array/],
    ["[", /r\.json: file: is not valid JSON: /],
  ];
  for (const [text, message] of cases) {
    assert.throws(() => compileMap(text, "r.json"), message, text);
  }
});

Deno.test("compileMap() accepts a null kafkaKey as no key", () => {
  const map = compileMap('[{"mqttTopic": "a", "kafkaTopic": "t", "kafkaKey": null}]', "r.json");
  assert.equal(resolveTopic(map, "a").partitionKey, null);
});

Deno.test("compileMap() refuses an invalid default stream for a Strimzi map", () => {
  assert.throws(
    () => compileMap("[]", "r.json", { defaultStream: "" }),
    { message: 'r.json: default_stream: "" is not a valid Iggy name (1-255 bytes)' },
  );
});

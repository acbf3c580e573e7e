import assert from "node:assert/strict";
import { compileMap } from "./compile.ts";
import { checkResolution } from "./names.ts";
import { resolveTopic } from "./resolve.ts";

const MAP_TEXT = `
default_stream = "sensors"
default_topic = "messages_default"

[[rule]]
mqtt_topic = 'sensors/([^/]+)/data'
stream = 'sensors'
topic = 'sensor_data'
partition_key = 'sensor_$1'

[[rule]]
mqtt_topic = 'sensors(?:/.*)?'
stream = 'sensors'
topic = 'sensor_others'

[[rule]]
mqtt_topic = 'opt/(a)?(b)?'
stream = 'o_$1'
topic = 't$2'
`;
const map = compileMap(MAP_TEXT, "test.toml");

Deno.test("resolveTopic() returns the default stream when no rule matches", () => {
  assert.deepEqual(resolveTopic(map, "other/thing"), {
    rule: null,
    stream: "sensors",
    topic: "messages_default",
    partitionKey: null,
  });
});

Deno.test("resolveTopic() fills stream, topic and key from the captures of the first match", () => {
  assert.deepEqual(resolveTopic(map, "sensors/s-17/data"), {
    rule: 1,
    stream: "sensors",
    topic: "sensor_data",
    partitionKey: "sensor_s-17",
  });
});

Deno.test("resolveTopic() uses the first rule in file order when several match", () => {
  // "sensors/x/data" also matches rule 2; rule 1 comes first (P2).
  assert.equal(resolveTopic(map, "sensors/x/data").rule, 1);
  assert.equal(resolveTopic(map, "sensors/x/data/more").rule, 2);
});

Deno.test("resolveTopic() matches the whole topic, not a prefix or a substring", () => {
  assert.equal(resolveTopic(map, "xsensors/a/data").rule, null);
  assert.equal(resolveTopic(map, "sensorsdata").rule, null);
  assert.equal(resolveTopic(map, "sensors").rule, 2);
});

Deno.test("resolveTopic() is a pure function of (map, topic)", () => {
  const topics = ["sensors/a/data", "nope", "sensors/b/data", "sensors/a/data", "opt/b"];
  const first = topics.map((t) => resolveTopic(map, t));
  const again = topics.toReversed().map((t) => resolveTopic(map, t)).toReversed();
  assert.deepEqual(again, first);
  assert.deepEqual(first[0], first[3]);
  for (const rule of map.rules) assert.equal(rule.regex.lastIndex, 0);
});

Deno.test("resolveTopic() does not validate names: an empty capture resolves to an empty name", () => {
  const r = resolveTopic(map, "opt/b");
  assert.deepEqual(r, { rule: 3, stream: "o_", topic: "tb", partitionKey: null });
  const empty = resolveTopic(map, "opt/");
  assert.equal(empty.topic, "t");
  assert.equal(checkResolution(empty), null);
});

Deno.test("resolveTopic() maps topics starting with $ like any other topic", () => {
  assert.equal(resolveTopic(map, "$SYS/broker").rule, null);
});

Deno.test("resolveTopic() resolves the quick-start config/topic-map.toml", async () => {
  const path = new URL("../../config/topic-map.toml", import.meta.url);
  const quick = compileMap(await Deno.readTextFile(path), "config/topic-map.toml");
  assert.equal(quick.defaultStream, "sensors");
  assert.equal(quick.defaultTopic, "messages_default");
  assert.deepEqual(resolveTopic(quick, "building/north/room/42/temp"), {
    rule: 1,
    stream: "building_north",
    topic: "telemetry",
    partitionKey: "room_42",
  });
  assert.deepEqual(resolveTopic(quick, "sensors/s-17/data"), {
    rule: 2,
    stream: "sensors",
    topic: "sensor_data",
    partitionKey: "sensor_s-17",
  });
  assert.deepEqual(resolveTopic(quick, "weather/today"), {
    rule: null,
    stream: "sensors",
    topic: "messages_default",
    partitionKey: null,
  });
});

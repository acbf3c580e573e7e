import assert from "node:assert/strict";
import { compileMap } from "./compile.ts";
import { patternLiteralPrefix, probeTopics, resolveFilter } from "./filter_resolve.ts";
import { filterMatches } from "./filter.ts";

const MAP = compileMap(
  `default_stream = "sensors"
default_topic = "messages_default"
[[rule]]
mqtt_topic = 'building/(\\w+)/room/(\\d+)/.*'
stream = 'building_$1'
topic = 'telemetry'
partition_key = 'room_$2'
[[rule]]
mqtt_topic = 'sensors/([^/]+)/data'
stream = 'sensors'
topic = 'sensor_data'
partition_key = 'sensor_$1'
[[rule]]
mqtt_topic = 'fixed/(a|b)/x'
stream = 'fixed'
topic = 'f_$1'
`,
  "map.toml",
);

Deno.test("resolveFilter() leaves out rules whose literal prefix no matching topic can have", () => {
  const t = resolveFilter(MAP, "sensors/+/data");
  assert.deepEqual(t.map((x) => x.rule), [2, null]);
  assert.deepEqual(t[0].stream, { name: "sensors" });
  assert.deepEqual(t[0].topic, { name: "sensor_data" });
  assert.equal(t[0].partitionKey, null, "the '+' level varies the key: every partition");
});

Deno.test("resolveFilter() gives a name pattern for a stream a wildcard level names", () => {
  const t = resolveFilter(MAP, "building/+/room/#");
  assert.equal(t[0].rule, 1);
  assert.ok("pattern" in t[0].stream);
  if ("pattern" in t[0].stream) {
    assert.ok(t[0].stream.pattern.test("building_north"));
    assert.ok(!t[0].stream.pattern.test("sensors"));
  }
  assert.equal(t[0].partitionKey, null);
  assert.equal(t.at(-1)!.rule, null, "the default target is always included");
});

Deno.test("resolveFilter() fixes the stream and the key a filter's literal levels fix", () => {
  const t = resolveFilter(MAP, "building/north/room/42/#");
  assert.deepEqual(t[0].stream, { name: "building_north" });
  assert.equal(t[0].partitionKey, "room_42");
  const open = resolveFilter(MAP, "building/north/room/+/temp");
  assert.deepEqual(open[0].stream, { name: "building_north" });
  assert.equal(open[0].partitionKey, null);
});

Deno.test("resolveFilter() includes a rule no probe matches (undecided), with open names", () => {
  const t = resolveFilter(MAP, "fixed/+/x");
  const rule3 = t.find((x) => x.rule === 3)!;
  assert.deepEqual(rule3.stream, { name: "fixed" });
  assert.ok("pattern" in rule3.topic);
});

Deno.test("resolveFilter() of an exact filter is the PUBLISH resolution", () => {
  assert.deepEqual(resolveFilter(MAP, "sensors/s-1/data"), [{
    rule: 2,
    stream: { name: "sensors" },
    topic: { name: "sensor_data" },
    partitionKey: "sensor_s-1",
  }]);
});

Deno.test("probeTopics() are topics the filter matches", () => {
  for (const f of ["building/+/room/#", "#", "+/+", "a/#"]) {
    for (const p of probeTopics(f)) assert.ok(filterMatches(f, p), `${f} ~ ${p}`);
  }
});

Deno.test("patternLiteralPrefix() stops at the first construct and drops optional characters", () => {
  assert.equal(patternLiteralPrefix("building/(\\w+)/x"), "building/");
  assert.equal(patternLiteralPrefix("ab?c"), "a");
  assert.equal(patternLiteralPrefix("a\\/b.c"), "a/b");
  assert.equal(patternLiteralPrefix("abc|xyz"), "");
});

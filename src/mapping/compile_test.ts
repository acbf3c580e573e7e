import assert from "node:assert/strict";
import { compileMap } from "./compile.ts";
import { MapError } from "./map_error.ts";

const SOURCE = "config/topic-map.toml";
const HEAD = 'default_stream = "sensors"\ndefault_topic = "messages_default"\n';

function rule(fields: Record<string, string>): string {
  const lines = Object.entries(fields).map(([k, v]) => `${k} = '${v}'`);
  return `[[rule]]\n${lines.join("\n")}\n`;
}

/** Compiles and returns the MapError it must throw. */
function refusal(text: string, source = SOURCE): MapError {
  try {
    compileMap(text, source);
  } catch (e) {
    assert.ok(e instanceof MapError, `expected MapError, got ${e}`);
    return e;
  }
  assert.fail("expected compileMap() to throw");
}

const BUILDING = {
  mqtt_topic: "building/(\\w+)/room/(\\d+)/.*",
  stream: "building_$1",
  topic: "telemetry",
};

Deno.test("compileMap() compiles the example map", () => {
  const map = compileMap(HEAD + rule({ ...BUILDING, partition_key: "room_$2" }), SOURCE);
  assert.equal(map.source, SOURCE);
  assert.equal(map.defaultStream, "sensors");
  assert.equal(map.defaultTopic, "messages_default");
  assert.equal(map.rules.length, 1);
  const r = map.rules[0];
  assert.deepEqual(
    [r.index, r.pattern, r.stream, r.topic, r.partitionKey],
    [1, "building/(\\w+)/room/(\\d+)/.*", "building_$1", "telemetry", "room_$2"],
  );
  assert.equal(r.regex.source, "^(?:building\\/(\\w+)\\/room\\/(\\d+)\\/.*)$");
  assert.equal(Object.isFrozen(map) && Object.isFrozen(map.rules) && Object.isFrozen(r), true);
});

Deno.test("compileMap() accepts a map with no rules", () => {
  assert.equal(compileMap(HEAD, SOURCE).rules.length, 0);
});

Deno.test("compileMap() refuses a pattern that does not compile", () => {
  const e = refusal(HEAD + rule({ mqtt_topic: "building/(\\w+", stream: "s", topic: "t" }));
  assert.equal(e.code, "map_invalid");
  assert.equal(e.source, SOURCE);
  assert.equal(e.rule, 1);
  assert.equal(e.key, "mqtt_topic");
  assert.match(
    e.message,
    /^config\/topic-map\.toml: rule 1 \(mqtt_topic\): pattern does not compile: /,
  );
});

Deno.test("compileMap() refuses a template naming a group beyond the pattern's groups", () => {
  const e = refusal(HEAD + rule({ ...BUILDING, partition_key: "room_$3" }));
  assert.equal(
    e.message,
    'config/topic-map.toml: rule 1 (partition_key): "$3" refers to capture group 3, ' +
      "but the pattern has only 2 groups",
  );
});

Deno.test("compileMap() refuses $0 in a template", () => {
  const e = refusal(HEAD + rule({ ...BUILDING, stream: "all_$0" }));
  assert.equal(e.key, "stream");
  assert.match(e.message, /^config\/topic-map\.toml: rule 1 \(stream\): "\$0" is not allowed/);
});

Deno.test("compileMap() refuses a capture group that can match a slash", () => {
  const e = refusal(
    HEAD + rule({ mqtt_topic: "sensors/([^/]+)/data", stream: "s", topic: "t" }) +
      rule({ mqtt_topic: "building/(\\w+)/room/(\\d{1,4})/(.*)", stream: "s", topic: "t_$3" }),
  );
  assert.equal(e.rule, 2);
  assert.equal(e.key, "mqtt_topic");
  assert.match(
    e.message,
    /^config\/topic-map\.toml: rule 2 \(mqtt_topic\): capture group 3 "\(\.\*\)" can match "\/"/,
  );
});

Deno.test("compileMap() refuses a constant template that is not a valid Iggy name", () => {
  assert.equal(
    refusal(HEAD + rule({ ...BUILDING, topic: "" })).message,
    'config/topic-map.toml: rule 1 (topic): "" is not a valid Iggy name (1-255 bytes)',
  );
  assert.equal(refusal(HEAD + rule({ ...BUILDING, stream: "s".repeat(256) })).key, "stream");
  assert.equal(refusal(HEAD + rule({ ...BUILDING, partition_key: "" })).key, "partition_key");
});

Deno.test("compileMap() refuses a template whose literal text alone exceeds 255 bytes", () => {
  const e = refusal(HEAD + rule({ ...BUILDING, stream: `${"s".repeat(256)}_$1` }));
  assert.equal(
    e.message,
    "config/topic-map.toml: rule 1 (stream): always expands to more than 255 bytes",
  );
});

Deno.test("compileMap() refuses a missing default_stream", () => {
  const e = refusal('default_topic = "messages_default"\n');
  assert.equal(e.rule, null);
  assert.equal(e.key, "default_stream");
  assert.equal(e.message, "config/topic-map.toml: default_stream: is missing");
});

Deno.test("compileMap() refuses an empty default_stream", () => {
  const e = refusal('default_stream = ""\ndefault_topic = "messages_default"\n');
  assert.equal(
    e.message,
    'config/topic-map.toml: default_stream: "" is not a valid Iggy name (1-255 bytes)',
  );
});

Deno.test("compileMap() refuses a missing or empty default_topic", () => {
  assert.equal(
    refusal('default_stream = "sensors"\n').message,
    "config/topic-map.toml: default_topic: is missing",
  );
  assert.equal(refusal('default_stream = "s"\ndefault_topic = ""\n').key, "default_topic");
});

Deno.test("compileMap() refuses a rule missing mqtt_topic, stream or topic", () => {
  for (const key of ["mqtt_topic", "stream", "topic"]) {
    const fields: Record<string, string> = { ...BUILDING };
    delete fields[key];
    const e = refusal(HEAD + rule(BUILDING) + rule(fields));
    assert.equal(e.message, `config/topic-map.toml: rule 2 (${key}): is missing`);
  }
});

Deno.test("compileMap() refuses an empty mqtt_topic", () => {
  assert.equal(
    refusal(HEAD + rule({ ...BUILDING, mqtt_topic: "" })).message,
    "config/topic-map.toml: rule 1 (mqtt_topic): is empty",
  );
});

Deno.test("compileMap() refuses an unknown key in a rule, naming the key", () => {
  const e = refusal(HEAD + rule({ ...BUILDING, partiton_key: "room_$2" }));
  assert.equal(e.rule, 1);
  assert.equal(e.key, "partiton_key");
  assert.match(
    e.message,
    /^config\/topic-map\.toml: rule 1 \(partiton_key\): unknown key "partiton_key"/,
  );
});

Deno.test("compileMap() refuses an unknown top-level key, naming the key", () => {
  const e = refusal(HEAD + 'default_partition = "x"\n');
  assert.equal(e.rule, null);
  assert.equal(e.key, "default_partition");
});

Deno.test("compileMap() refuses a non-string value", () => {
  const e = refusal(HEAD + "[[rule]]\nmqtt_topic = 'a'\nstream = 's'\ntopic = 7\n");
  assert.equal(e.message, "config/topic-map.toml: rule 1 (topic): must be a string, got number");
});

Deno.test("compileMap() refuses [rule] written as a single table", () => {
  const e = refusal(HEAD + "[rule]\nmqtt_topic = 'a'\nstream = 's'\ntopic = 't'\n");
  assert.equal(
    e.message,
    "config/topic-map.toml: rule: must be an array of tables: write [[rule]]",
  );
});

Deno.test("compileMap() refuses text that is not TOML", () => {
  const e = refusal("default_stream = \n");
  assert.equal(e.key, "file");
  assert.match(e.message, /^config\/topic-map\.toml: file: is not valid TOML: /);
  assert.ok(e.cause instanceof Error);
});

Deno.test("compileMap() ignores options for a TOML map", () => {
  const e = refusal('default_topic = "t"\n');
  assert.equal(e.key, "default_stream");
  assert.throws(
    () => compileMap('default_topic = "t"\n', SOURCE, { defaultStream: "x" }),
    MapError,
  );
});

Deno.test("compileMap() refuses a map that does not parse with a one-line MapError", () => {
  // Found by the loader fuzzer (tests/fuzz/loaders.ts): the parsers' messages quote the file
  // over several lines, and main.ts prints the error as it is.
  const cases: [string, string, RegExp][] = [
    [
      'default_stream = "a',
      "m.toml",
      /^m\.toml: file: is not valid TOML: .*unfinished string \(line 1, column \d+\)$/,
    ],
    ["[\nG\n]", "m.json", /^m\.json: file: is not valid JSON: Unexpected token 'G'/],
  ];
  for (const [text, source, message] of cases) {
    assert.throws(
      () => compileMap(text, source),
      (e) => e instanceof MapError && !e.message.includes("\n") && message.test(e.message),
      text,
    );
  }
});

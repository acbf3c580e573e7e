/**
 * The CLI as an operator runs it: `deno run -P=gateway main.ts …`, the same permission set the
 * compiled binary embeds.
 */
import assert from "node:assert/strict";
import { partitionForKey } from "../../src/mapping/mod.ts";
import { freeFixedPort, HAS_MOSQUITTO_CLIENTS, run, waitFor } from "../helpers/gateway.ts";
import { cli, ROOT } from "../helpers/cli.ts";
import { removeStore } from "../helpers/store.ts";

const opts = {};
const DENO = Deno.execPath();

async function tempMap(text: string, ext = "toml"): Promise<string> {
  const f = await Deno.makeTempFile({
    dir: `${ROOT}config`,
    prefix: ".test-map-",
    suffix: `.${ext}`,
  });
  await Deno.writeTextFile(f, text);
  return f;
}

Deno.test("check accepts the shipped config and map", async () => {
  const r = await cli(["check"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /OK: config\/topic-map\.toml: 2 rule\(s\)/);
  // The store's disk: its free space against the reserve below which appends are refused.
  assert.match(
    r.stdout,
    /embedded\.path "data\/gateway\.db": the disk holding "[^"]+" has \d+ bytes free \(reserve 4194304/,
  );
});

Deno.test("check refuses $3 in a two-group pattern, naming the rule and the placeholder", async () => {
  const f = await tempMap(
    `default_stream = "s"\ndefault_topic = "t"\n[[rule]]\nmqtt_topic = 'a/(\\w+)'\nstream = 's'\ntopic = 't'\n[[rule]]\nmqtt_topic = 'b/(\\w+)/(\\d+)'\nstream = 's'\ntopic = 't'\npartition_key = 'k_$3'\n`,
  );
  try {
    const r = await cli(["check", "--map", f]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /rule 2/);
    assert.match(r.stderr, /\$3/);
  } finally {
    await Deno.remove(f);
  }
});

const BAD_MAPS: [string, string, RegExp][] = [
  [
    "pattern does not compile",
    `[[rule]]\nmqtt_topic = 'a/(\\w+'\nstream = 's'\ntopic = 't'\n`,
    /rule 1/,
  ],
  [
    "$0 in a template",
    `[[rule]]\nmqtt_topic = 'a/(\\w+)'\nstream = 's$0'\ntopic = 't'\n`,
    /rule 1.*\$0|\$0.*rule 1/s,
  ],
  [
    "capture group that can match /",
    `[[rule]]\nmqtt_topic = 'a/(.*)'\nstream = 's_$1'\ntopic = 't'\n`,
    /rule 1/,
  ],
  [
    "constant name too long",
    `[[rule]]\nmqtt_topic = 'a'\nstream = '${"x".repeat(256)}'\ntopic = 't'\n`,
    /rule 1/,
  ],
];
for (const [what, rules, want] of BAD_MAPS) {
  Deno.test(`check refuses a map where ${what}`, async () => {
    const f = await tempMap(`default_stream = "s"\ndefault_topic = "t"\n${rules}`);
    try {
      const r = await cli(["check", "--map", f]);
      assert.equal(r.code, 1, r.stdout);
      assert.match(r.stderr, want);
    } finally {
      await Deno.remove(f);
    }
  });
}

Deno.test("check refuses a map without defaults", async () => {
  const f = await tempMap(`[[rule]]\nmqtt_topic = 'a'\nstream = 's'\ntopic = 't'\n`);
  try {
    const r = await cli(["check", "--map", f]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /default_stream/);
  } finally {
    await Deno.remove(f);
  }
});

Deno.test("explain --json resolves DESIGN §3's examples, naming the partition", async () => {
  // No store at this path: the partitions are those auto_create would give the topic.
  const none = `data/no-store-${crypto.randomUUID()}.db`;
  const r = await cli([
    "explain",
    "--json",
    "building/north/room/42/temp",
    "sensors/s1/data",
    "plain/topic",
  ], { env: { IGGY_MQTT_EMBEDDED_PATH: none } });
  const note = `no embedded store at "${none}" yet`;
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(lines, [
    {
      topic: "building/north/room/42/temp",
      rule: 1,
      stream: "building_north",
      iggy_topic: "telemetry",
      partition_key: "room_42",
      partitions: 3,
      partition: partitionForKey("room_42", 3),
      exists: null,
      note,
    },
    {
      topic: "sensors/s1/data",
      rule: 2,
      stream: "sensors",
      iggy_topic: "sensor_data",
      partition_key: "sensor_s1",
      partitions: 3,
      partition: partitionForKey("sensor_s1", 3),
      exists: null,
      note,
    },
    {
      topic: "plain/topic",
      rule: null,
      stream: "sensors",
      iggy_topic: "messages_default",
      partition_key: null,
      partitions: 3,
      partition: null,
      exists: null,
      note,
    },
  ]);
});

Deno.test("explain --json resolves the Strimzi README's five example rules loaded from JSON", async () => {
  const r = await cli([
    "explain",
    "--map",
    "config/examples/strimzi-topic-mapping-rules.json",
    "--json",
    "building/4/room/23/temperature",
    "sensors/temperature/data",
    "sensors/temperature",
    "devices/4/data/new",
    "locations/london/temperature",
    "unmatched/topic",
  ]);
  assert.equal(r.code, 0, r.stderr);
  const got = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(got.map((g) => [g.rule, g.iggy_topic, g.partition_key]), [
    [1, "building_4", "room_23"],
    [2, "sensor_data", null],
    [3, "sensor_others", null],
    [4, "device_4_data", "device_new"],
    [5, "locations", "location_london"],
    [null, "messages_default", null],
  ]);
});

Deno.test("a bad config value exits non-zero naming the key; an environment variable overrides a key", async () => {
  const bad = await cli(["check"], { env: { IGGY_MQTT_LIMITS_MAX_PACKET_BYTES: "10" } });
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /limits\.max_packet_bytes/);
  const mapped = await cli(["check"], {
    env: { IGGY_MQTT_MAPPING_MAP_FILE: "config/examples/strimzi-topic-mapping-rules.json" },
  });
  assert.equal(mapped.code, 0, mapped.stderr);
  assert.match(mapped.stdout, /strimzi-topic-mapping-rules\.json: 5 rule\(s\)/);
});

Deno.test("hash-password reads stdin and prints a verifiable hash", async () => {
  const r = await cli(["hash-password"], { stdin: "s3cret\n" });
  assert.equal(r.code, 0, r.stderr);
  const { verifyPassword } = await import("../../src/access/password.ts");
  assert.ok(await verifyPassword("s3cret", r.stdout.trim()));
  assert.ok(!(await verifyPassword("other", r.stdout.trim())));
});

Deno.test("--version names the protocol versions", async () => {
  const r = await cli(["--version"]);
  assert.match(r.stdout, /MQTT 3\.1\.1 and 5; Iggy binary protocols 0\.11\.0 and 0\.12\.2/);
});

Deno.test({
  name: "run: mosquitto_pub QoS 1 → read --json shows it; SIGTERM drains and exits 0",
  ignore: !HAS_MOSQUITTO_CLIENTS,
  ...opts,
  async fn() {
    await Deno.mkdir(`${ROOT}data`, { recursive: true });
    const db = `data/cli-test-${crypto.randomUUID()}.db`;
    const port = freeFixedPort();
    const env = {
      IGGY_MQTT_LISTENERS_TCP: `127.0.0.1:${port}`,
      IGGY_MQTT_LISTENERS_HTTP: "127.0.0.1:0",
      IGGY_MQTT_LISTENERS_WS: "", // the quick start config binds 8083
      IGGY_MQTT_EMBEDDED_PATH: db,
    };
    const child = new Deno.Command(DENO, {
      args: ["run", "-P=gateway", "main.ts", "run"],
      cwd: ROOT,
      env,
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const out: string[] = [];
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    (async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        out.push(value);
      }
    })();
    try {
      await waitFor(
        () => out.join("").includes("Anonymous MQTT clients are allowed"),
        60000,
        "gateway start",
      )
        .catch((e) => {
          throw new Error(`${e.message}; stdout so far: ${out.join("")}`);
        });
      assert.match(out.join(""), /Anonymous MQTT clients are allowed/);
      const pub = await run("mosquitto_pub", [
        "-h",
        "127.0.0.1",
        "-p",
        String(port),
        "-q",
        "1",
        "-t",
        "building/north/room/42/temp",
        "-m",
        "21.5",
      ]);
      assert.equal(pub.code, 0, pub.stderr);
      const r = await cli(
        ["read", "--stream", "building_north", "--topic", "telemetry", "--json"],
        { env: { IGGY_MQTT_EMBEDDED_PATH: db } },
      );
      assert.equal(r.code, 0, r.stderr);
      const m = JSON.parse(r.stdout.trim().split("\n")[0]);
      assert.equal(m.headers["mqtt.topic"], "building/north/room/42/temp");
      assert.equal(m.payload, "21.5");
      assert.equal(m.partition, 0); // XXH32("room_42") mod 3
      child.kill("SIGTERM");
      const status = await child.status;
      assert.equal(status.code, 0);
      await waitFor(() => out.join("").includes("Gateway stopped"), 2000, "stop log line");
    } finally {
      try {
        child.kill("SIGKILL");
      } catch { /* exited */ }
      await child.stderr.cancel().catch(() => {});
      await removeStore(`${ROOT}${db}`);
    }
  },
});

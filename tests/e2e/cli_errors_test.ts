/**
 * What the CLI says when the operator asks for help or gets something wrong, run as the
 * operator runs it (`deno run -P=gateway main.ts …`): usage on --help (exit 0); a one-line
 * message naming the option, then usage (exit 2) for a command line the command does not
 * accept; exactly one line naming what and where (exit 1) for a port in use, a missing file or
 * a path outside the permission set. A stack trace is for bugs only, so none may appear here.
 * (The happy paths are in cli_test.ts.)
 */
import assert from "node:assert/strict";
import { cli, ownStderrLines, ROOT, STACK_FRAME } from "../helpers/cli.ts";
import { removeStore } from "../helpers/store.ts";
import { EmbeddedBackend } from "../../src/log/embedded/mod.ts";

type Result = { code: number; stdout: string; stderr: string };

function assertNoStack(r: Result): void {
  assert.doesNotMatch(r.stderr, STACK_FRAME, `stack in stderr:\n${r.stderr}`);
  assert.doesNotMatch(r.stdout, STACK_FRAME, `stack in stdout:\n${r.stdout}`);
}

/** Exit 1 with exactly `line` (a string or a pattern) as everything we wrote to stderr. */
function assertOneLine(r: Result, line: string | RegExp): void {
  assertNoStack(r);
  assert.equal(r.code, 1, r.stderr);
  const lines = ownStderrLines(r.stderr);
  assert.equal(lines.length, 1, `want one line, got:\n${lines.join("\n")}`);
  if (typeof line === "string") assert.equal(lines[0], line);
  else assert.match(lines[0], line);
}

/** A store path under ./data (inside the permission set), unique per test. */
async function storePath(): Promise<string> {
  await Deno.mkdir(`${ROOT}data`, { recursive: true });
  return `data/cli-errors-${crypto.randomUUID()}.db`;
}

const HELP: string[][] = [
  ["--help"],
  ["-h"],
  ["run", "--help"],
  ["check", "--help"],
  ["explain", "-h"],
  ["read", "--help"],
  ["hash-password", "--help"],
  // Help wins over whatever else is wrong on the line.
  ["read", "--count", "abc", "--help"],
];
for (const args of HELP) {
  Deno.test(`main.ts ${args.join(" ")} prints usage and exits 0`, async () => {
    const r = await cli(args);
    assert.equal(r.code, 0, r.stderr);
    const command = args[0].startsWith("-") ? "" : ` ${args[0]}`;
    assert.match(r.stdout, new RegExp(`^Usage: iggy-mqtt-gateway${command}`));
    assert.deepEqual(ownStderrLines(r.stderr), []);
    assertNoStack(r);
  });
}

const USAGE_ERRORS: [string[], RegExp][] = [
  [["check", "--bogus"], /^check: unknown option "--bogus"$/],
  [["--bogus"], /^run: unknown option "--bogus"$/],
  [["run", "--map", "config/topic-map.toml"], /^run: unknown option "--map"$/],
  [["hash-password", "--json"], /^hash-password: unknown option "--json"$/],
  [["read", "--topic", "telemetry"], /^read: --stream is required$/],
  [
    ["read", "--stream", "s", "--topic", "t", "--count", "abc"],
    /^read: --count must be a positive integer, got "abc"$/,
  ],
  [
    ["read", "--stream", "s", "--topic", "t", "--partition", "x"],
    /^read: --partition must be a non-negative integer/,
  ],
  [
    ["read", "--stream", "s", "--topic", "t", "--from", "-1"],
    /^read: --from must be a non-negative integer, got "-1"$/,
  ],
  [["explain"], /^explain: at least one TOPIC is required$/],
  [
    ["check", "--config", "config/gateway.toml", "--map", "config/topic-map.toml"],
    /cannot be given together/,
  ],
  [["frobnicate"], /^Unknown command "frobnicate"$/],
];
for (const [args, want] of USAGE_ERRORS) {
  Deno.test(`main.ts ${args.join(" ")} exits 2 with one line naming the problem, then usage`, async () => {
    const r = await cli(args);
    assert.equal(r.code, 2, r.stderr);
    const lines = ownStderrLines(r.stderr);
    assert.match(lines[0], want);
    assert.match(lines[1], /^Usage: iggy-mqtt-gateway/);
    assert.equal(r.stdout, "");
    assertNoStack(r);
  });
}

Deno.test("a mistyped IGGY_MQTT_ variable stops check (any one-character slip) and run (word slips) with one line naming the key meant", async () => {
  const slips: [string, string, string[]][] = [
    ["IGGY_MQTT_LISTENER_TCP", "IGGY_MQTT_LISTENERS_TCP \\(listeners\\.tcp\\)", ["check", "run"]],
    [
      "IGGY_MQTT_AUTHS_ALLOW_ANONYMOUS",
      "IGGY_MQTT_AUTH_ALLOW_ANONYMOUS \\(auth\\.allow_anonymous\\)",
      ["check", "run"],
    ],
    [
      "IGGY_MQTT_LIMITS_MAX_PACEKT_BYTES",
      "IGGY_MQTT_LIMITS_MAX_PACKET_BYTES \\(limits\\.max_packet_bytes\\)",
      ["check"],
    ],
  ];
  for (const [typo, meant, commands] of slips) {
    for (const command of commands) {
      const r = await cli([command], { env: { [typo]: "x" } });
      assertOneLine(
        r,
        new RegExp(
          `^Invalid config key "${typo}": unknown environment variable for this gateway; did you mean ${meant}\\?$`,
        ),
      );
    }
  }
});

Deno.test("hash-password with nothing on stdin exits 2 saying so", async () => {
  const r = await cli(["hash-password"], { stdin: "" });
  assert.equal(r.code, 2);
  assert.equal(ownStderrLines(r.stderr)[0], "hash-password: no password on stdin");
  assertNoStack(r);
});

Deno.test("read --partition beyond the topic's partitions exits 1 with one line naming them", async () => {
  const db = await storePath();
  const store = new EmbeddedBackend({
    path: `${ROOT}${db}`,
    users: [],
    maxStoreBytes: 1 << 24,
    retentionMaxAgeSeconds: 0,
    retentionMaxTopicBytes: 0,
    retentionIntervalMs: 86_400_000,
    maxAppendBatch: 1,
    writerThread: "in-process",
  });
  await store.open();
  await store.createTopic("building_north", "telemetry", { partitions: 3 });
  await store.close();
  try {
    const env = { IGGY_MQTT_EMBEDDED_PATH: db };
    const args = ["read", "--stream", "building_north", "--topic", "telemetry"];
    const beyond = await cli([...args, "--partition", "7"], { env });
    assertOneLine(
      beyond,
      "read: partition 7 does not exist; topic building_north/telemetry has partitions 0-2",
    );
    const last = await cli([...args, "--partition", "2"], { env });
    assert.equal(last.code, 0, last.stderr);
    const missing = await cli(["read", "--stream", "building_north", "--topic", "nope"], { env });
    assertOneLine(missing, `read: no topic "nope" in stream "building_north" in "${db}"`);
  } finally {
    await removeStore(`${ROOT}${db}`);
  }
});

Deno.test("read without a store yet exits 1 with one line naming embedded.path", async () => {
  const r = await cli(["read", "--stream", "s", "--topic", "t"], {
    env: { IGGY_MQTT_EMBEDDED_PATH: "data/never-created.db" },
  });
  assertOneLine(r, /^read: no embedded store at "data\/never-created\.db" \(embedded\.path\)/);
});

/** Holds a port on 127.0.0.1 for `fn`, so the gateway finds it in use. */
async function withBusyPort(fn: (port: number) => Promise<void>): Promise<void> {
  const busy = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    await fn((busy.addr as Deno.NetAddr).port);
  } finally {
    busy.close();
  }
}

Deno.test("run with the HTTP port in use exits 1 with one line naming the HTTP listener", async () => {
  await withBusyPort(async (port) => {
    const db = await storePath();
    try {
      const r = await cli(["run"], {
        env: {
          IGGY_MQTT_LISTENERS_HTTP: `127.0.0.1:${port}`,
          IGGY_MQTT_LISTENERS_WS: "", // the quick start config binds 8083
          IGGY_MQTT_LISTENERS_TCP: "127.0.0.1:0",
          IGGY_MQTT_EMBEDDED_PATH: db,
        },
      });
      assertOneLine(r, `HTTP listener 127.0.0.1:${port}: address already in use`);
    } finally {
      await removeStore(`${ROOT}${db}`);
    }
  });
});

Deno.test("run with the MQTT port in use exits 1 with one line naming the MQTT listener", async () => {
  await withBusyPort(async (port) => {
    const db = await storePath();
    try {
      const r = await cli(["run"], {
        env: {
          IGGY_MQTT_LISTENERS_HTTP: "127.0.0.1:0",
          IGGY_MQTT_LISTENERS_WS: "", // the quick start config binds 8083
          IGGY_MQTT_LISTENERS_TCP: `127.0.0.1:${port}`,
          IGGY_MQTT_EMBEDDED_PATH: db,
        },
      });
      assertOneLine(r, `MQTT listener 127.0.0.1:${port}: address already in use`);
    } finally {
      await removeStore(`${ROOT}${db}`);
    }
  });
});

Deno.test("a missing config or map file exits 1 with one line naming it", async () => {
  assertOneLine(
    await cli(["check", "--config", "config/no-such-gateway.toml"]),
    'Cannot read config file "config/no-such-gateway.toml": not found',
  );
  assertOneLine(
    await cli(["check", "--map", "config/no-such-map.toml"]),
    'Cannot read topic map "config/no-such-map.toml": not found',
  );
  assertOneLine(
    await cli(["check"], { env: { IGGY_MQTT_MAPPING_MAP_FILE: "config/no-such-map.toml" } }),
    'Cannot read mapping.map_file "config/no-such-map.toml": not found',
  );
});

Deno.test("run in forward mode with a missing iggy.tls_ca_file exits 1 with one line naming it", async () => {
  const db = await storePath();
  try {
    assertOneLine(
      await cli(["run"], {
        env: {
          IGGY_MQTT_EMBEDDED_PATH: db,
          IGGY_MQTT_LISTENERS_TCP: "127.0.0.1:0",
          IGGY_MQTT_LISTENERS_WS: "",
          IGGY_MQTT_LISTENERS_HTTP: "",
          IGGY_MQTT_FORWARD_ENABLED: "true",
          IGGY_MQTT_IGGY_TLS: "true",
          IGGY_MQTT_IGGY_TLS_CA_FILE: "config/no-such-ca.pem",
          IGGY_MQTT_IGGY_PASSWORD: "secret",
        },
      }),
      'Cannot read iggy.tls_ca_file "config/no-such-ca.pem": not found',
    );
  } finally {
    await removeStore(`${ROOT}${db}`);
  }
});

const READ_WALL =
  / the gateway may read only \.\/config, \.\/data, \/etc\/iggy-mqtt-gateway, \/var\/lib\/iggy-mqtt-gateway \(permission set "gateway" in deno\.json\); put the file there$/;
const WRITE_WALL =
  / the gateway may write only \.\/data, \/var\/lib\/iggy-mqtt-gateway \(permission set "gateway" in deno\.json\); put the file there$/;

Deno.test("files outside the permission set exit 1 with one line naming the readable places", async () => {
  // Real files, so that only the permission set stands in the way.
  const dir = await Deno.makeTempDir({ prefix: "iggy-mqtt-outside-" });
  const db = await storePath();
  try {
    await Deno.copyFile(`${ROOT}config/topic-map.toml`, `${dir}/my-map.toml`);
    await Deno.copyFile(`${ROOT}config/gateway.toml`, `${dir}/gateway.toml`);
    const map = await cli(["check", "--map", `${dir}/my-map.toml`]);
    assertOneLine(
      map,
      new RegExp(`^Cannot read topic map "${dir}/my-map.toml":${READ_WALL.source}`),
    );
    const config = await cli(["check", "--config", `${dir}/gateway.toml`]);
    assertOneLine(
      config,
      new RegExp(`^Cannot read config file "${dir}/gateway.toml":${READ_WALL.source}`),
    );
    const cert = await cli(["run"], {
      env: {
        IGGY_MQTT_LISTENERS_TCP: "",
        IGGY_MQTT_LISTENERS_HTTP: "",
        IGGY_MQTT_LISTENERS_WS: "", // the quick start config binds 8083
        IGGY_MQTT_LISTENERS_TLS: "127.0.0.1:0",
        IGGY_MQTT_LISTENERS_TLS_CERT_FILE: `${dir}/cert.pem`,
        IGGY_MQTT_LISTENERS_TLS_KEY_FILE: `${dir}/key.pem`,
        IGGY_MQTT_EMBEDDED_PATH: db,
      },
    });
    assertOneLine(cert, new RegExp(`^Cannot read listeners.tls_cert_file "${dir}/cert.pem":`));
    const read = await cli(["read", "--stream", "s", "--topic", "t"], {
      env: { IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db` },
    });
    assertOneLine(
      read,
      new RegExp(`^Cannot read embedded store "${dir}/gateway.db":${READ_WALL.source}`),
    );
    const store = await cli(["run"], {
      env: {
        IGGY_MQTT_LISTENERS_TCP: "127.0.0.1:0",
        IGGY_MQTT_LISTENERS_HTTP: "127.0.0.1:0",
        IGGY_MQTT_LISTENERS_WS: "", // the quick start config binds 8083
        IGGY_MQTT_EMBEDDED_PATH: `${dir}/gateway.db`,
      },
    });
    assertOneLine(
      store,
      new RegExp(`^Cannot write embedded store "${dir}/gateway.db":${WRITE_WALL.source}`),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
    await removeStore(`${ROOT}${db}`);
  }
});

Deno.test("a TLS certificate that is not PEM exits 1 with one line naming the listener and files", async () => {
  const bad = await Deno.makeTempFile({
    dir: `${ROOT}config`,
    prefix: ".test-cert-",
    suffix: ".pem",
  });
  const rel = bad.slice(ROOT.length);
  const db = await storePath();
  try {
    await Deno.writeTextFile(bad, "not a certificate\n");
    const r = await cli(["run"], {
      env: {
        IGGY_MQTT_LISTENERS_TCP: "",
        IGGY_MQTT_LISTENERS_HTTP: "",
        IGGY_MQTT_LISTENERS_WS: "", // the quick start config binds 8083
        IGGY_MQTT_LISTENERS_TLS: "127.0.0.1:0",
        IGGY_MQTT_LISTENERS_TLS_CERT_FILE: rel,
        IGGY_MQTT_LISTENERS_TLS_KEY_FILE: rel,
        IGGY_MQTT_EMBEDDED_PATH: db,
      },
    });
    assertOneLine(
      r,
      /^MQTT TLS listener 127\.0\.0\.1:0: unusable certificate or key \(.+\) in listeners\.tls_cert_file/,
    );
  } finally {
    await Deno.remove(bad);
    await removeStore(`${ROOT}${db}`);
  }
});

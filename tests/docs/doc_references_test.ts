/**
 * The docs a newcomer reads cite only what exists: every config key, `IGGY_MQTT_*` name, metric,
 * option of the gateway's commands, `deno task`, repository path and relative link in README.md,
 * SECURITY.md, docs/*.md, config/gateway.toml's comments and the systemd unit is checked against
 * the code (tests/docs/doc_references.ts says how each is found).
 */
import assert from "node:assert/strict";
import denoJson from "../../deno.json" with { type: "json" };
import { envNameOf, KEY_SPECS, type KeySpec } from "../../src/config/schema.ts";
import { COMMANDS } from "../../src/cli/commands.ts";
import { ROOT } from "../helpers/cli.ts";
import {
  citationsOf,
  type CiteContext,
  dottedLiterals,
  headingAnchors,
  type Known,
  problemsOf,
  registeredMetrics,
} from "./doc_references.ts";

/** The docs read: whether each is Markdown (false: a commented config file). */
const DOCS: readonly { file: string; markdown: boolean }[] = [
  { file: "README.md", markdown: true },
  { file: "SECURITY.md", markdown: true },
  ...[...Deno.readDirSync(`${ROOT}docs`)]
    .filter((e) => e.name.endsWith(".md"))
    .map((e) => ({ file: `docs/${e.name}`, markdown: true })),
  { file: "config/gateway.toml", markdown: false },
  { file: "config/iggy-mqtt-gateway.service", markdown: false },
];

/**
 * Names the docs cite on purpose that look like metrics and are not, each with why. Every entry
 * must still occur in src/ (a test below), so the list cannot outlive what it excuses. (String
 * defaults of config keys, such as the stream `mqtt_gateway`, pass as what they are.)
 */
const NOT_METRICS: ReadonlyMap<string, string> = new Map([
  ["iggy_sends", "a field of /status.json (the Iggy client's send counts), not a metric"],
]);

/** Registrations whose metric name is a parameter: the literals are read at their callers. */
const PASS_THROUGH: ReadonlySet<string> = new Set([
  "src/observe/gateway_metrics.ts: .counter(name",
  "src/observe/triple_gauge.ts: .gauge(name",
]);

function walk(dir: string): string[] {
  const files: string[] = [];
  for (const e of Deno.readDirSync(`${ROOT}${dir}`)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) files.push(...walk(path));
    else files.push(path);
  }
  return files;
}

const SOURCES = walk("src").filter((f) => f.endsWith(".ts") && !f.endsWith("_test.ts"));

function metricsOfSource(): { names: Set<string>; histograms: Set<string>; unread: string[] } {
  const names = new Set<string>();
  const histograms = new Set<string>();
  const unread: string[] = [];
  for (const file of SOURCES) {
    const found = registeredMetrics(Deno.readTextFileSync(`${ROOT}${file}`));
    found.names.forEach((n) => names.add(n));
    found.histograms.forEach((n) => histograms.add(n));
    for (const d of found.dynamic) {
      if (!PASS_THROUGH.has(`${file}: ${d}`)) unread.push(`${file}: ${d}`);
    }
  }
  return { names, histograms, unread };
}

/** Whether a repository path exists; `*` matches any run of characters within one name. */
function exists(path: string): boolean {
  const parts = path.replace(/\/$/, "").split("/");
  const match = (dir: string, i: number): boolean => {
    if (i === parts.length) return true;
    const part = parts[i];
    if (!part.includes("*")) {
      try {
        const stat = Deno.statSync(`${ROOT}${dir}${part}`);
        return i === parts.length - 1 || (stat.isDirectory && match(`${dir}${part}/`, i + 1));
      } catch {
        return false;
      }
    }
    const re = new RegExp(
      `^${part.split("*").map((s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&")).join(".*")}$`,
    );
    try {
      return [...Deno.readDirSync(`${ROOT}${dir}`)].some((e) =>
        re.test(e.name) &&
        (i === parts.length - 1 || (e.isDirectory && match(`${dir}${e.name}/`, i + 1)))
      );
    } catch {
      return false;
    }
  };
  return match("", 0);
}

const anchorCache = new Map<string, Set<string> | null>();
function anchors(path: string): Set<string> | null {
  if (!anchorCache.has(path)) {
    anchorCache.set(
      path,
      path.endsWith(".md") ? headingAnchors(Deno.readTextFileSync(`${ROOT}${path}`)) : null,
    );
  }
  return anchorCache.get(path)!;
}

const KEYS = KEY_SPECS.map((s) => s.key as string);
const metrics = metricsOfSource();

const CONTEXT: CiteContext = {
  tables: new Set(KEYS.map((k) => k.split(".")[0])),
  tasks: denoJson.tasks,
  commands: new Set(COMMANDS.map((c) => c.name)),
  roots: new Set(["src", "tests", "config", "tools", "docs", ".ci"]),
  srcFolders: new Set(
    [...Deno.readDirSync(`${ROOT}src`)].filter((e) => e.isDirectory).map((e) => e.name),
  ),
};

const optionsOf = (name: string) =>
  new Set(["--help", ...COMMANDS.find((c) => c.name === name)!.options.map((o) => `--${o.name}`)]);

const KNOWN: Known = {
  keys: new Set(KEYS),
  // The schema is left out: a key removed from it must not pass by being its own literal.
  codeNames: new Set(
    SOURCES.filter((f) => f !== "src/config/schema.ts")
      .flatMap((f) => dottedLiterals(Deno.readTextFileSync(`${ROOT}${f}`))),
  ),
  envNames: new Set(KEYS.map(envNameOf)),
  metrics: new Set([
    ...metrics.names,
    ...NOT_METRICS.keys(),
    ...(KEY_SPECS as readonly KeySpec[]).flatMap((s) =>
      typeof s.default === "string" ? [s.default] : []
    ),
  ]),
  histograms: metrics.histograms,
  options: new Map([
    // Options before any command go to `run` (main.ts), besides --version and --help.
    ["", new Set(["--version", ...optionsOf("run")])],
    ...COMMANDS.map((c): [string, Set<string>] => [c.name, optionsOf(c.name)]),
  ]),
  tasks: new Set(Object.keys(denoJson.tasks)),
  fileNames: new Set(
    ["main.ts", ...["src", "tests", "tools"].flatMap(walk)].map((f) => f.replace(/^.*\//, "")),
  ),
  exists,
  anchors,
};

Deno.test("docs: every key, name, metric, option, task, path and link they cite exists", () => {
  const problems: string[] = [];
  for (const { file, markdown } of DOCS) {
    const text = Deno.readTextFileSync(`${ROOT}${file}`);
    problems.push(...problemsOf(file, citationsOf(text, CONTEXT, markdown), KNOWN));
  }
  assert.deepEqual(problems, [], `docs cite what does not exist:\n${problems.join("\n")}`);
});

Deno.test("docs: the metric names registered in src/ are all read (no name this test cannot see)", () => {
  assert.deepEqual(metrics.unread, []);
  // The registrations are found at all: a few the docs rely on, of each kind.
  for (const name of ["mqtt_publishes_total", "forward_lag_bytes", "reader_lag_messages"]) {
    assert.ok(metrics.names.has(name), name);
  }
  assert.ok(metrics.histograms.has("mqtt_puback_latency_seconds"));
});

Deno.test("docs: each name excused as not a metric still occurs in src/", () => {
  const source = SOURCES.map((f) => Deno.readTextFileSync(`${ROOT}${f}`)).join("\n");
  for (const [name, why] of NOT_METRICS) {
    assert.ok(source.includes(name), `${name} (${why}) no longer occurs in src/: drop it here`);
  }
});

Deno.test("docs: README and OPERATIONS name every place the permission sets let the gateway read", () => {
  const sets = denoJson.permissions;
  for (const file of ["README.md", "docs/OPERATIONS.md"]) {
    const text = Deno.readTextFileSync(`${ROOT}${file}`);
    for (const place of new Set([...sets.gateway.read, ...sets["gateway-epoll"].read])) {
      assert.ok(text.includes(`\`${place}\``), `${file} does not name the read grant ${place}`);
    }
  }
});

/** The citations and problems of one made-up doc. */
function check(doc: string, markdown = true): string[] {
  return problemsOf("docs/MADE_UP.md", citationsOf(doc, CONTEXT, markdown), KNOWN);
}

Deno.test("citationsOf() finds a made-up config key, env name and metric, and passes real ones", () => {
  assert.deepEqual(
    check(
      "Raise `limits.max_packet_bytes` (`IGGY_MQTT_LIMITS_MAX_PACKET_BYTES`), watch " +
        '`mqtt_publishes_total{outcome="acked"}` and `mqtt_puback_latency_seconds_bucket`.',
    ),
    [],
  );
  assert.deepEqual(
    check(
      "Raise `limits.max_packet_size` (`IGGY_MQTT_LIMITS_MAX_PACKET_SIZE`), watch " +
        "`mqtt_publishes_acked` and mqtt_publishes_refused_total.",
    ),
    [
      'docs/MADE_UP.md:1: no config key "limits.max_packet_size" (src/config/schema.ts)',
      "docs/MADE_UP.md:1: no config key has the environment name IGGY_MQTT_LIMITS_MAX_PACKET_SIZE",
      'docs/MADE_UP.md:1: no metric "mqtt_publishes_acked" is registered in src/',
      'docs/MADE_UP.md:1: no metric "mqtt_publishes_refused_total" is registered in src/',
    ],
  );
});

Deno.test("citationsOf() leaves a mistyped name shown with the gateway's answer to it", () => {
  const doc = [
    "```",
    "Unknown IGGY_MQTT_FORWARD_ENABLE; did you mean forward.enabled (IGGY_MQTT_FORWARD_ENABLED)?",
    "```",
    "`IGGY_MQTT_FORWARD_ENABLE=true` passes.",
  ].join("\n");
  assert.deepEqual(check(doc), [
    "docs/MADE_UP.md:4: no config key has the environment name IGGY_MQTT_FORWARD_ENABLE",
  ]);
});

Deno.test("citationsOf() reads a key prefix, and file names are not keys", () => {
  assert.deepEqual(
    check("The keys `session.store_*` and the file `gateway.toml`, `gateway.db`."),
    [],
  );
  assert.deepEqual(check("The keys `session.stored_*`."), [
    'docs/MADE_UP.md:1: no config key starts with "session.stored_"',
  ]);
});

Deno.test("citationsOf() checks options against the command they are given to", () => {
  const doc = [
    "```sh",
    "npx --yes deno@2.9.6 task read --stream s --topic t --json | jq .",
    "sudo -u iggy-mqtt-gateway iggy-mqtt-gateway check --config /etc/g.toml --map m.toml",
    "iggy-mqtt-gateway --version",
    "journalctl -u iggy-mqtt-gateway --since today",
    "npx --yes deno@2.9.6 task explain --topic x",
    "./iggy-mqtt-gateway-x86_64-linux run --confg g.toml",
    "deno run -P=gateway main.ts read --tail",
    "```",
    "`check [--config F \\| --map F]`, `read --follow` and `explain [--config F \\| --mapp F]`.",
  ].join("\n");
  assert.deepEqual(check(doc), [
    "docs/MADE_UP.md:6: explain takes no option --topic",
    "docs/MADE_UP.md:7: run takes no option --confg",
    "docs/MADE_UP.md:8: read takes no option --tail",
    "docs/MADE_UP.md:10: read takes no option --follow",
    "docs/MADE_UP.md:10: explain takes no option --mapp",
  ]);
});

Deno.test("citationsOf() finds a made-up task, path and link", () => {
  const doc = [
    "Run `deno task lint` and `deno task fuzz:long`; see `src/net/ws_listener.ts`, " +
    "`net/tls_listener.ts`, `tests/e2e/*_test.ts`, `src/net/quic_listener.ts`, " +
    "`net/quic.ts`, `settled.ts` and `unsettled.ts`.",
    "Read [reload](OPERATIONS.md#reload-sighup), [tls](OPERATIONS.md#tls-done), " +
    "[arch](ARCHITECTURE.md), [gone](GONE.md) and [web](https://iggy.apache.org).",
  ].join("\n");
  assert.deepEqual(check(doc), [
    'docs/MADE_UP.md:1: no task "fuzz:long" in deno.json',
    "docs/MADE_UP.md:1: no file or folder src/net/quic_listener.ts",
    "docs/MADE_UP.md:1: no file or folder src/net/quic.ts",
    "docs/MADE_UP.md:1: no file named unsettled.ts",
    "docs/MADE_UP.md:2: link to OPERATIONS.md#tls-done: docs/OPERATIONS.md has no heading #tls-done",
    "docs/MADE_UP.md:2: link to GONE.md: no file docs/GONE.md",
  ]);
});

Deno.test("citationsOf() reads a config file's comments as prose and its lines as code", () => {
  const toml = [
    "# default: 8092 · env: IGGY_MQTT_LIMITS_MAX_PACKET_BYTE (see src/config/schema.ts)",
    "max_packet_bytes = 8092",
  ].join("\n");
  assert.deepEqual(check(toml, false), [
    "docs/MADE_UP.md:1: no config key has the environment name IGGY_MQTT_LIMITS_MAX_PACKET_BYTE",
  ]);
});

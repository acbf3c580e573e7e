/**
 * Fuzz of the loaders an operator feeds: the config (`loadConfig`: TOML and the `IGGY_MQTT_*`
 * environment) and the topic map (`compileMap`: TOML and Strimzi JSON). Inputs are the shipped
 * files (`config/gateway.toml`, `config/topic-map.toml`, the Strimzi example) mutated as text:
 * whole lines deleted, repeated or given another value of another type, keys misspelt, and the
 * byte mutations of `random.ts`. A loader may only return or throw its own error
 * (`ConfigError`, `MapError`), and that error is one line: main.ts prints it as it is.
 *
 * @module
 */
import { ConfigError } from "../../src/config/errors.ts";
import { loadConfig } from "../../src/config/load.ts";
import { compileMap, MapError } from "../../src/mapping/mod.ts";
import { describe, int, mutate, pick, type Rand } from "./random.ts";

/** What one batch of loader inputs found. */
export interface LoaderBatchResult {
  inputs: number;
  /** Inputs refused with the loader's own one-line error. */
  refused: number;
  /** Inputs that loaded. */
  loaded: number;
  crashes: string[];
}

interface LoaderCorpus {
  configs: string[];
  maps: string[];
  strimzi: string[];
}

const VALUES = [
  '""',
  '"x"',
  "0",
  "-1",
  "1e999",
  "9223372036854775807",
  "18446744073709551616",
  "nan",
  "inf",
  "true",
  "[]",
  '["a", 1]',
  "{}",
  "{ a = 1 }",
  "1979-05-27T07:32:00Z",
  '"0.0.0.0:99999"',
  '"[::1]:1883"',
  '"(.*)"',
  "'(['",
  "'$9'",
  '"\\u0000"',
  '"é\\ud800"',
  "0x7fffffff",
  "1_000_000_000_000",
];

const KEYS = [
  "id",
  "tcp",
  "max_packet_bytes",
  "mqtt_topic",
  "stream",
  "kafkaKey",
  "x",
  "[x]",
  "[[rule]]",
];

let corpusCache: LoaderCorpus | undefined;

function corpus(): LoaderCorpus {
  if (corpusCache) return corpusCache;
  const read = (path: string) => Deno.readTextFileSync(new URL(`../../${path}`, import.meta.url));
  corpusCache = {
    configs: [
      read("config/gateway.toml"),
      read("config/examples/paho.toml"),
      '[gateway]\nbackend = "iggy"\n[iggy]\naddress = "127.0.0.1:8090"\nprotocol = "auto"\n',
      "[forward]\nenabled = true\n[limits]\nmax_packet_bytes = 8092\n",
      '[[users]]\nusername = "alice"\npassword_hash = "x"\n[anonymous.permissions]\nglobal = []\n',
    ],
    maps: [read("config/topic-map.toml"), read("config/examples/paho-topic-map.toml")],
    strimzi: [read("config/examples/strimzi-topic-mapping-rules.json")],
  };
  return corpusCache;
}

/** One line-level change: a line dropped, repeated, revalued or added. */
function mutateLines(r: Rand, text: string): string {
  const lines = text.split("\n");
  const at = int(r, lines.length);
  switch (int(r, 5)) {
    case 0:
      lines.splice(at, 1);
      break;
    case 1:
      lines.splice(at, 0, lines[at]);
      break;
    case 2: {
      const eq = lines[at].indexOf("=");
      if (eq > 0) lines[at] = `${lines[at].slice(0, eq + 1)} ${pick(r, VALUES)}`;
      break;
    }
    case 3:
      lines.splice(at, 0, `${pick(r, KEYS)} = ${pick(r, VALUES)}`);
      break;
    default: { // a misspelt key or table
      const l = lines[at];
      const i = int(r, Math.max(1, l.length));
      lines[at] = l.slice(0, i) + l.slice(i + 1);
    }
  }
  return lines.join("\n");
}

/** A mutated text: line changes or byte mutations (UTF-8 may come out invalid: lossy). */
function mutateText(r: Rand, text: string, others: readonly string[]): string {
  let out = text;
  for (let k = 1 + int(r, 3); k > 0; k--) {
    if (r() < 0.6) out = mutateLines(r, out);
    else {
      const enc = new TextEncoder();
      const bytes = mutate(r, enc.encode(out), others.map((o) => enc.encode(o)));
      out = new TextDecoder().decode(bytes);
    }
  }
  return out;
}

/** Environment overlays: real names with odd values, and names one slip from real ones. */
function mutatedEnv(r: Rand): Record<string, string> {
  if (r() < 0.6) return {};
  const names = [
    "IGGY_MQTT_LIMITS_MAX_PACKET_BYTES",
    "IGGY_MQTT_FORWARD_ENABLED",
    "IGGY_MQTT_FORWARD_ENABLE",
    "IGGY_MQTT_LISTENERS_TCP",
    "IGGY_MQTT_LISTENERS_MQTT_VERSIONS",
    "IGGY_MQTT_GATEWAY_BACKEND",
    "IGGY_MQTT_IGGY_ADDRESS",
    "IGGY_MQTT_",
    "IGGY_MQTT_X",
  ];
  const values = [
    "",
    " ",
    "1",
    "-0",
    "true",
    "TRUE",
    "9".repeat(400),
    "a,b,,",
    "\u0000",
    "[::1]:0",
  ];
  const env: Record<string, string> = {};
  for (let k = 1 + int(r, 3); k > 0; k--) env[pick(r, names)] = pick(r, values);
  return env;
}

/** Runs `f`; a value or the loader's own one-line error is fine, anything else a crash. */
function expectOwnError(
  res: LoaderBatchResult,
  what: string,
  own: (e: unknown) => boolean,
  input: string,
  f: () => unknown,
): void {
  res.inputs++;
  try {
    f();
    res.loaded++;
  } catch (e) {
    const shown = JSON.stringify(input.slice(0, 300));
    if (!own(e)) res.crashes.push(`${what}: ${describe(e)} input=${shown}`);
    else if ((e as Error).message.includes("\n")) {
      const first = (e as Error).message.split("\n")[0];
      res.crashes.push(`${what}: error of more than one line: ${first} input=${shown}`);
    } else res.refused++;
  }
}

/** Runs `count` loader inputs from `r`. */
export function runLoaderInputs(r: Rand, count: number): LoaderBatchResult {
  const c = corpus();
  const res: LoaderBatchResult = { inputs: 0, refused: 0, loaded: 0, crashes: [] };
  for (let i = 0; i < count; i++) {
    const choice = r();
    if (choice < 0.4) {
      const text = mutateText(r, pick(r, c.configs), c.configs);
      const env = mutatedEnv(r);
      expectOwnError(
        res,
        "loadConfig",
        (e) => e instanceof ConfigError,
        text,
        () => loadConfig({ text, source: "fuzz.toml", env }),
      );
    } else if (choice < 0.75) {
      const text = mutateText(r, pick(r, c.maps), c.maps);
      expectOwnError(
        res,
        "compileMap (TOML)",
        (e) => e instanceof MapError,
        text,
        () => compileMap(text, "fuzz-map.toml"),
      );
    } else {
      const text = mutateText(r, pick(r, c.strimzi), c.strimzi);
      expectOwnError(
        res,
        "compileMap (Strimzi JSON)",
        (e) => e instanceof MapError,
        text,
        () => compileMap(text, "fuzz-map.json"),
      );
    }
  }
  return res;
}

/**
 * The CLI's commands and the options each accepts: one table that both the argument check
 * (args.ts) and the usage text (usage.ts) read, so they cannot disagree.
 *
 * @module
 */
import type { CommandSpec, OptionSpec } from "./args.ts";

/** Where the config is read from when `--config` is not given. */
export const DEFAULT_CONFIG = "config/gateway.toml";

const CONFIG: OptionSpec = {
  name: "config",
  kind: "string",
  value: "FILE",
  help: `config file (default ${DEFAULT_CONFIG}; a missing default file means built-in defaults)`,
};
const MAP: OptionSpec = {
  name: "map",
  kind: "string",
  value: "FILE",
  help: "topic map to use instead of the config's mapping.map_file (.toml, or Strimzi .json)",
};
const JSON_LINES: OptionSpec = { name: "json", kind: "boolean", help: "one JSON object per line" };

const URL_OPTION: OptionSpec = {
  name: "url",
  kind: "string",
  value: "URL",
  help: "the gateway's HTTP listener (default: http://<listeners.http of the config>)",
};
const ADMIN_OPTIONS = [URL_OPTION, CONFIG, JSON_LINES];
const CLIENT_IDS = { value: "CLIENT_ID", help: "MQTT client ids", min: 1 };

/** The admin commands: each one request to the running gateway (`src/http/admin.ts`). */
const ADMIN_SPECS: readonly CommandSpec[] = [
  {
    name: "clients",
    summary: "List the clients connected to the running gateway.",
    options: ADMIN_OPTIONS,
  },
  {
    name: "disconnect",
    summary:
      "Disconnect clients (MQTT 5: DISCONNECT 0x98 Administrative action); needs IGGY_MQTT_HTTP_ADMIN_TOKEN.",
    options: [...ADMIN_OPTIONS, {
      name: "discard-session",
      kind: "boolean",
      help: "also drop the client's stored session (its subscriptions and positions)",
    }],
    positionals: CLIENT_IDS,
  },
  {
    name: "sessions",
    summary: "List the stored sessions (connected and offline) of the running gateway.",
    options: ADMIN_OPTIONS,
  },
  {
    name: "drop-session",
    summary:
      "Drop the stored sessions of clients that are not connected; needs IGGY_MQTT_HTTP_ADMIN_TOKEN.",
    options: ADMIN_OPTIONS,
    positionals: CLIENT_IDS,
  },
  {
    name: "topics",
    summary: "List the local log's streams, topics and partitions with their messages and bytes.",
    options: ADMIN_OPTIONS,
  },
  {
    name: "log-level",
    summary:
      "Print the running gateway's log level, or set it (until a restart; needs IGGY_MQTT_HTTP_ADMIN_TOKEN).",
    options: ADMIN_OPTIONS,
    positionals: { value: "LEVEL", help: "debug, info, warn or error", min: 0 },
  },
];

/** Every command, in the order the overview lists them. `run` is the default command. */
export const COMMANDS: readonly CommandSpec[] = [
  {
    name: "run",
    summary: "Start the gateway (the default command; SIGTERM/SIGINT drain, SIGHUP reloads).",
    options: [CONFIG],
  },
  {
    name: "check",
    summary:
      "Compile the config and its topic map (or only --map FILE), read the files it names, log in to Iggy; start nothing.",
    options: [CONFIG, MAP, {
      name: "offline",
      kind: "boolean",
      help: "do not log in to Iggy (Iggy mode, forward mode): say it was not checked",
    }, {
      name: "env-only",
      kind: "boolean",
      help:
        "only the IGGY_MQTT_ variable names, for every slip of one character; silent when right (run before run by the start tasks and the unit)",
    }],
    exclusive: [["config", "map"], ["config", "env-only"], ["map", "env-only"]],
  },
  {
    name: "explain",
    summary:
      "Print each topic's stream, Iggy topic, key, partition and rule; a wildcard filter's triples as SUBSCRIBE resolves them.",
    options: [CONFIG, MAP, JSON_LINES],
    exclusive: [["config", "map"]],
    positionals: {
      value: "TOPIC",
      help: "MQTT topic names, or filters (+, #, $share/<group>/…) to resolve",
      min: 1,
    },
  },
  {
    name: "read",
    summary:
      "Print stored messages (or the retained ones) of the embedded store (works while the gateway runs), or with --upstream of the Iggy upstream.",
    options: [
      {
        name: "stream",
        kind: "string",
        value: "S",
        help: "stream to read",
        required: true,
        unless: "retained",
      },
      {
        name: "topic",
        kind: "string",
        value: "T",
        help: "topic to read",
        required: true,
        unless: "retained",
      },
      {
        name: "partition",
        kind: "offset",
        value: "P",
        help: "only this partition (default: every partition)",
      },
      { name: "from", kind: "offset", value: "O", help: "first offset (default 0)" },
      {
        name: "count",
        kind: "positive",
        value: "N",
        help: "at most N messages per partition (default 100)",
      },
      { name: "retained", kind: "boolean", help: "print the retained messages instead, by topic" },
      {
        name: "upstream",
        kind: "boolean",
        help:
          "read the Iggy of [iggy] instead (forward mode: what reached it), logged in as the gateway",
      },
      {
        name: "filter",
        kind: "string",
        value: "F",
        help: "with --retained: only topics the MQTT filter F matches (e.g. 'home/+/state')",
      },
      JSON_LINES,
      CONFIG,
    ],
    exclusive: [["retained", "partition"], ["retained", "from"], ["retained", "upstream"]],
  },
  ...ADMIN_SPECS,
  {
    name: "hash-password",
    summary: "Read a password on stdin, print its hash for [[users]] password_hash.",
    options: [],
  },
];

/** The spec of command `name`, or undefined for an unknown command. */
export function commandSpec(name: string): CommandSpec | undefined {
  return COMMANDS.find((c) => c.name === name);
}

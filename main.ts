/**
 * Iggy MQTT Gateway command line. The only place that calls `Deno.exit`.
 *
 *   run [--config FILE]                         start the gateway (default command)
 *   check [--config FILE | --map FILE]          compile config and topic map
 *   explain [--config F | --map F] [--json] T…  print each topic's resolution
 *   read --stream S --topic T [--partition P] [--from O] [--count N] [--json] [--config F]
 *   hash-password                               read a password on stdin, print its hash
 *   --version
 *
 * @module
 */
import { parseArgs } from "node:util";
import { loadConfigFile, readOperatorFile } from "./src/config/files.ts";
import { ConfigError, OperatorError } from "./src/config/errors.ts";
import type { GatewayConfig } from "./src/config/types.ts";
import { Gateway, loadMap } from "./src/gateway.ts";
import { compileMap, explainJson, initPartitioner, MapError } from "./src/mapping/mod.ts";
import type { CompiledMap } from "./src/mapping/mod.ts";
import { EmbeddedBackend } from "./src/log/embedded/mod.ts";
import { BackendError } from "./src/log/port.ts";
import { hashPassword } from "./src/session/password.ts";
import { formatVersion, PROTOCOL_VERSION } from "./src/log/iggy/mod.ts";
import { formatRead } from "./src/cli/read_format.ts";

const VERSION = "0.1.0";
const DEFAULT_CONFIG = "config/gateway.toml";

async function main(argv: string[]): Promise<number> {
  if (argv[0] === "--version" || argv[0] === "version") {
    console.log(
      `iggy-mqtt-gateway ${VERSION} (MQTT 3.1.1; Iggy binary protocol ${
        formatVersion(PROTOCOL_VERSION)
      })`,
    );
    return 0;
  }
  const command = argv.length === 0 || argv[0].startsWith("-") ? "run" : argv[0];
  const rest = command === argv[0] ? argv.slice(1) : argv;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      config: { type: "string" },
      map: { type: "string" },
      json: { type: "boolean", default: false },
      stream: { type: "string" },
      topic: { type: "string" },
      partition: { type: "string" },
      from: { type: "string" },
      count: { type: "string" },
    },
  });
  const configPath = values.config ?? DEFAULT_CONFIG;
  const config = () => loadConfigFile(configPath, values.config !== undefined);
  switch (command) {
    case "run":
      return await run(await config(), configPath, values.config !== undefined);
    case "check": {
      const map = await mapFrom(values.map, values.map ? null : await config());
      console.log(
        `OK: ${map.source}: ${map.rules.length} rule(s), default ${map.defaultStream}/${map.defaultTopic}`,
      );
      return 0;
    }
    case "explain": {
      await initPartitioner();
      const map = await mapFrom(values.map, values.map ? null : await config());
      for (const t of positionals) {
        const e = explainJson(map, t);
        if (values.json) console.log(JSON.stringify(e));
        else {
          console.log(
            `${t} → stream "${e.stream}", topic "${e.iggy_topic}", key ${
              e.partition_key === null ? "(none: balanced)" : `"${e.partition_key}"`
            } (${e.rule === null ? "default" : `rule ${e.rule}`})`,
          );
        }
      }
      return 0;
    }
    case "read":
      return await read(await config(), values);
    case "hash-password": {
      const password = (await new Response(Deno.stdin.readable).text()).replace(/\r?\n$/, "");
      if (password.length === 0) throw new ConfigError("password", "empty password on stdin");
      console.log(await hashPassword(password));
      return 0;
    }
    default:
      console.error(
        `Unknown command "${command}". Commands: run, check, explain, read, hash-password.`,
      );
      return 2;
  }
}

async function mapFrom(
  mapPath: string | undefined,
  config: GatewayConfig | null,
): Promise<CompiledMap> {
  if (mapPath !== undefined) {
    return compileMap(await readOperatorFile("topic map", mapPath), mapPath);
  }
  return await loadMap(config!);
}

async function run(
  config: GatewayConfig,
  configPath: string,
  configPathGiven: boolean,
): Promise<number> {
  const gateway = await Gateway.create(config);
  await gateway.start();
  let stopping: Promise<void> | null = null;
  const stop = (signal: string) => {
    if (stopping) return;
    gateway.logger.info("Stopping on signal", { signal });
    stopping = gateway.stop();
  };
  Deno.addSignalListener("SIGTERM", () => stop("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => stop("SIGINT"));
  Deno.addSignalListener("SIGHUP", () => {
    loadConfigFile(configPath, configPathGiven)
      .then((next) => gateway.reload(next))
      .catch((err) =>
        gateway.logger.error("Reload refused; the previous map, users and certificates stay", {
          error: String(err?.message ?? err),
        })
      );
  });
  await new Promise<void>((resolve) => {
    const t = setInterval(() => {
      if (stopping) {
        clearInterval(t);
        stopping.then(resolve);
      }
    }, 50);
  });
  return 0;
}

async function read(
  config: GatewayConfig,
  v: {
    stream?: string;
    topic?: string;
    partition?: string;
    from?: string;
    count?: string;
    json?: boolean;
  },
): Promise<number> {
  if (!v.stream || !v.topic) throw new ConfigError("read", "--stream and --topic are required");
  if (config.gateway.backend !== "embedded") {
    throw new ConfigError(
      "gateway.backend",
      "read works on the embedded store; use Iggy's own tools for iggy",
    );
  }
  const backend = new EmbeddedBackend({
    path: config.embedded.path,
    users: [],
    maxStoreBytes: config.embedded.max_store_bytes,
    retentionMaxAgeSeconds: 0,
    retentionMaxTopicBytes: 0,
    retentionIntervalMs: 86_400_000,
    maxAppendBatch: 1,
    readOnly: true,
  });
  await backend.open();
  try {
    const info = await backend.getTopic(v.stream, v.topic);
    if (info === null) {
      console.error(`No topic "${v.topic}" in stream "${v.stream}" in ${config.embedded.path}`);
      return 1;
    }
    const partitions = v.partition !== undefined
      ? [Number(v.partition)]
      : Array.from({ length: info.partitions }, (_, i) => i);
    const from = Number(v.from ?? 0);
    const count = Number(v.count ?? 100);
    for (const partition of partitions) {
      const msgs = await backend.poll({ stream: v.stream, topic: v.topic, partition }, from, count);
      for (const m of msgs) console.log(formatRead(m, v.json ?? false));
    }
    return 0;
  } finally {
    await backend.close();
  }
}

/**
 * Errors that say what the operator must fix, printed as their one-line message: a stack
 * would only bury it. Anything else is a bug and keeps its stack.
 */
function isOperatorFacing(err: unknown): err is Error {
  return err instanceof ConfigError || err instanceof MapError ||
    err instanceof OperatorError || err instanceof BackendError;
}

if (import.meta.main) {
  try {
    Deno.exit(await main(Deno.args));
  } catch (err) {
    if (isOperatorFacing(err)) {
      console.error(err.message);
      Deno.exit(1);
    }
    console.error(`Fatal: ${(err as Error)?.stack ?? err}`);
    Deno.exit(1);
  }
}

/**
 * Iggy MQTT Gateway command line. The only place that calls `Deno.exit`. Commands, their
 * options and usage text live in src/cli/; `--help` lists them.
 *
 *   run [--config FILE]                         start the gateway (default command)
 *   check [--config FILE | --map FILE] [--offline]  config, topic map, files, Iggy login
 *   check --env-only                            only the IGGY_MQTT_ names, thoroughly
 *   explain [--config F | --map F] [--json] T…  each topic's or filter's triples, with partitions
 *   read --stream S --topic T [--partition P] [--from O] [--count N] [--json] [--upstream] [--config F]
 *   read --retained [--filter F] [--json] [--config F]
 *   clients | sessions | topics [--url U] [--json] [--config F]   ask the running gateway
 *   disconnect [--discard-session] CLIENT_ID… | drop-session CLIENT_ID… | log-level [LEVEL]
 *   hash-password                               read a password on stdin, print its hash
 *   --version
 *
 * Exit codes: 0 done, 1 an operator's problem (one line, no stack) or a bug (with a stack),
 * 2 a command line the command does not accept (the message, then its usage).
 *
 * @module
 */
import { loadConfigFile, readOperatorFile, readOwnEnv } from "./src/config/files.ts";
import { ConfigError, OperatorError } from "./src/config/errors.ts";
import { checkEnvNames } from "./src/config/load.ts";
import type { GatewayConfig } from "./src/config/types.ts";
import { Gateway, loadMap } from "./src/gateway.ts";
import { PartialReloadError } from "./src/net/mqtt_listener.ts";
import { compileMap, filterProblem, MapError } from "./src/mapping/mod.ts";
import type { CompiledMap } from "./src/mapping/mod.ts";
import { BackendError } from "./src/log/port.ts";
import { hashPassword } from "./src/access/password.ts";
import { parseCommandArgs, type ParsedArgs, UsageError } from "./src/cli/args.ts";
import { commandSpec, DEFAULT_CONFIG } from "./src/cli/commands.ts";
import { commandUsage, overviewUsage } from "./src/cli/usage.ts";
// A type-only import: `deno run` does not load the module for it.
import type * as CliTools from "./src/cli/tools.ts";

async function main(argv: string[]): Promise<number> {
  const first = argv[0];
  if (first === "--version" || first === "version") {
    console.log((await loadTools()).versionLine());
    return 0;
  }
  if (first === "--help" || first === "-h" || first === "help") {
    console.log(overviewUsage());
    return 0;
  }
  // No command, or options first ("--config F"): run, as `deno task start` and the unit do.
  const name = first === undefined || first.startsWith("-") ? "run" : first;
  const spec = commandSpec(name);
  if (!spec) {
    console.error(`Unknown command "${name}"\n\n${overviewUsage()}`);
    return 2;
  }
  const args = parseCommandArgs(spec, name === first ? argv.slice(1) : argv);
  if (args.help) {
    console.log(commandUsage(spec));
    return 0;
  }
  // Only for the commands that have --config (hash-password has none).
  const configFile = () => {
    const path = args.string("config");
    return { path: path ?? DEFAULT_CONFIG, given: path !== undefined };
  };
  // `check` looks for mistyped IGGY_MQTT_ names thoroughly; the other commands for word slips.
  const config = () =>
    loadConfigFile(configFile().path, configFile().given, readOwnEnv(name === "check"));
  switch (name) {
    case "run":
      return await run(await config(), configFile().path, configFile().given);
    case "check": {
      // `run` looks for word slips only; the start tasks and the unit run this first.
      if (args.flag("env-only")) {
        checkEnvNames(readOwnEnv(true));
        return 0;
      }
      const map = await mapFrom(args, config);
      const lines = [
        `OK: ${map.source}: ${map.rules.length} rule(s), default ${map.defaultStream}/${map.defaultTopic}`,
      ];
      // With a config (not a bare --map): the files `run` will read, then in Iggy mode and
      // forward mode a login to Iggy (the mapped topics' durability, the forward plan). Nothing
      // is printed before every check passed: a failure is its one line.
      if (args.string("map") === undefined) {
        const checked = await config();
        const { configFileLines, storeDiskLines, iggyLines } = await loadTools();
        lines.push(...await configFileLines(checked));
        lines.push(...await storeDiskLines(checked));
        lines.push(...await iggyLines(checked, map, args.flag("offline")));
      }
      for (const line of lines) console.log(line);
      return 0;
    }
    case "explain":
      await (await loadTools()).explain(
        await mapFrom(args, config),
        await config(),
        args.positionals,
        args.flag("json"),
        console.log,
      );
      return 0;
    case "read":
      if (args.flag("retained")) {
        const filter = args.string("filter");
        const bad = filter === undefined ? null : filterProblem(filter);
        if (bad !== null) throw new UsageError(spec, `--filter "${filter}": ${bad}`);
        await (await loadTools()).readRetained(
          await config(),
          filter,
          args.flag("json"),
          console.log,
        );
        return 0;
      }
      await (await loadTools()).readMessages(
        await config(),
        {
          stream: args.string("stream")!,
          topic: args.string("topic")!,
          partition: args.integer("partition") ?? null,
          from: args.integer("from") ?? 0,
          count: args.integer("count") ?? 100,
          json: args.flag("json"),
        },
        (line) => console.log(line),
        args.flag("upstream"),
      );
      return 0;
    case "clients":
    case "disconnect":
    case "sessions":
    case "drop-session":
    case "topics":
    case "log-level":
      await (await loadTools()).runAdminCommand(name, await config(), {
        url: args.string("url"),
        json: args.flag("json"),
        positionals: args.positionals,
        discardSession: name === "disconnect" && args.flag("discard-session"),
      }, (line) => console.log(line));
      return 0;
    case "hash-password": {
      const password = (await new Response(Deno.stdin.readable).text()).replace(/\r?\n$/, "");
      if (password.length === 0) throw new UsageError(spec, "no password on stdin");
      console.log(await hashPassword(password));
      return 0;
    }
    default:
      throw new Error(`Command "${name}" has a spec but no implementation`);
  }
}

/** `--map FILE` alone, or the map the config names. */
/**
 * The commands other than `run`, loaded from a URL built at run time (see `src/cli/tools.ts`):
 * a running gateway does not hold their source.
 */
function loadTools(): Promise<typeof CliTools> {
  return import(new URL("./src/cli/tools.ts", import.meta.url).href);
}

async function mapFrom(
  args: ParsedArgs,
  config: () => Promise<GatewayConfig>,
): Promise<CompiledMap> {
  const mapPath = args.string("map");
  if (mapPath === undefined) return await loadMap(await config());
  return compileMap(await readOperatorFile("topic map", mapPath), mapPath);
}

async function run(
  config: GatewayConfig,
  configPath: string,
  configPathGiven: boolean,
): Promise<number> {
  const gateway = await Gateway.create(config);
  await gateway.start();
  // Settled by the first SIGTERM/SIGINT once the gateway has stopped: run() awaits it.
  const stopped = Promise.withResolvers<void>();
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    gateway.logger.info("Stopping on signal", { signal });
    gateway.stop().then(stopped.resolve, stopped.reject);
  };
  Deno.addSignalListener("SIGTERM", () => stop("SIGTERM"));
  Deno.addSignalListener("SIGINT", () => stop("SIGINT"));
  // One reload at a time: a second SIGHUP waits for the first (two wss rebinds at once would
  // race for the port).
  let reloading = Promise.resolve();
  Deno.addSignalListener("SIGHUP", () => {
    reloading = reloading.then(() =>
      loadConfigFile(configPath, configPathGiven)
        .then((next) => gateway.reload(next))
        .catch((err) =>
          gateway.logger.error(
            err instanceof PartialReloadError
              ? `Reload refused; the previous map and users stay, the ${
                err.swapped.join(" and ")
              } listener serves the new certificate`
              : "Reload refused; the previous map, users and certificates stay",
            { error: String(err?.message ?? err) },
          )
        )
    );
  });
  await stopped.promise;
  return 0;
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
    if (err instanceof UsageError) {
      console.error(`${err.message}\n\n${commandUsage(err.spec)}`);
      Deno.exit(2);
    }
    if (isOperatorFacing(err)) {
      console.error(err.message);
      Deno.exit(1);
    }
    console.error(`Fatal: ${(err as Error)?.stack ?? err}`);
    Deno.exit(1);
  }
}

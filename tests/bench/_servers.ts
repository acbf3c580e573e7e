/**
 * Servers under test, started and stopped by the harness: the gateway (embedded backend,
 * default durability), Debian mosquitto (generated minimal config, no persistence) and aedes
 * (npm, under Deno). Each is pinned to core 0 with `taskset` when available, with the highest
 * file-descriptor limit the shell allows, and measured from spawn to ready.
 *
 * @module
 */
import { connectMqtt } from "./_mqtt.ts";

/** Repository root (cwd of the gateway). */
export const ROOT = new URL("../../", import.meta.url).pathname;

/** Whether a command runs and exits 0. */
export function has(cmd: string, args: string[] = ["--version"]): boolean {
  try {
    return new Deno.Command(cmd, { args, stdout: "null", stderr: "null" }).outputSync().success;
  } catch {
    return false;
  }
}

/** How processes under test are launched. */
export interface LaunchOptions {
  /** taskset is available. */
  readonly taskset: boolean;
  /**
   * Own scheduler autogroup at nice -10 (setsid): on a machine shared with other work, the
   * figures then measure the processes under test rather than the neighbours' builds.
   */
  readonly priority: boolean;
}

/** The argv that runs `cmd` on `core` with raised limits (and priority when asked). */
export function launchArgv(o: LaunchOptions, core: number, cmd: string[]): string[] {
  const prio = o.priority ? "echo -10 > /proc/$$/autogroup 2>/dev/null; " : "";
  const pin = o.taskset ? ["taskset", "-c", String(core)] : [];
  return [
    ...(o.priority ? ["setsid"] : []),
    "sh",
    "-c",
    `${prio}ulimit -n $(ulimit -Hn) 2>/dev/null; exec "$@"`,
    "sh",
    ...pin,
    ...cmd,
  ];
}

/** A free loopback TCP port. */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** A started server. */
export interface Running {
  readonly name: string;
  readonly pid: number;
  readonly port: number;
  /** Spawn → ready, ms. */
  readonly readyMs: number;
  /** Its Prometheus `/metrics` (the gateway only). */
  readonly metricsUrl?: string;
  /** Last lines of its stderr (for failures). */
  tail(): string;
  stop(): Promise<void>;
}

/** A server the harness knows how to start. */
export interface ServerDef {
  readonly name: string;
  /** What runs it, when not the binary itself (aedes: node or deno). */
  readonly runtime?: string;
  /** The only scenarios it can run, when not every one (the floor has no sessions). */
  readonly scenarios?: readonly string[];
  start(o: LaunchOptions): Promise<Running>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Children that must not outlive the bench when it is interrupted (servers, load generators). */
const children = new Set<Deno.ChildProcess>();
let reaping = false;

/**
 * Kills `child` too when the bench gets SIGINT or SIGTERM, then exits: a server left running
 * would hold its ports, its store and any lock the bench ran under.
 */
export function reapOnSignal(child: Deno.ChildProcess): Deno.ChildProcess {
  children.add(child);
  child.status.finally(() => children.delete(child));
  if (!reaping) {
    reaping = true;
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      Deno.addSignalListener(signal, () => {
        for (const c of children) {
          try {
            c.kill("SIGKILL");
          } catch { /* already gone */ }
        }
        Deno.exit(signal === "SIGINT" ? 130 : 143);
      });
    }
  }
  return child;
}

async function spawnUntilReady(
  name: string,
  argv: string[],
  port: number,
  ready: () => Promise<boolean>,
  extra: { cwd?: string; env?: Record<string, string> } = {},
): Promise<Running> {
  const t0 = performance.now();
  const child = new Deno.Command(argv[0], {
    args: argv.slice(1),
    cwd: extra.cwd,
    env: extra.env,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  reapOnSignal(child);
  let tail = "";
  const drained = (async () => {
    const dec = new TextDecoder();
    for await (const b of child.stderr) tail = (tail + dec.decode(b)).slice(-4000);
  })();
  let exited = false;
  const status = child.status.then((s) => (exited = true, s));
  const deadline = t0 + 30_000;
  while (!(await ready())) {
    if (exited || performance.now() > deadline) {
      if (!exited) child.kill("SIGKILL");
      await status;
      await drained;
      throw new Error(`Server "${name}" did not become ready: ${tail.slice(-1000)}`);
    }
    await sleep(5);
  }
  const readyMs = performance.now() - t0;
  return {
    name,
    pid: child.pid,
    port,
    readyMs,
    tail: () => tail,
    async stop() {
      if (!exited) child.kill("SIGTERM");
      const killer = setTimeout(() => !exited && child.kill("SIGKILL"), 15_000);
      await status;
      clearTimeout(killer);
      await drained;
    },
  };
}

/** Ready = a CONNECT gets CONNACK 0. */
function connackReady(port: number): () => Promise<boolean> {
  return async () => {
    try {
      (await connectMqtt(port, "bench-ready", 10)).close();
      return true;
    } catch {
      return false;
    }
  };
}

/**
 * The runtime flags of `deno task start` (between `run` and `main.ts`, e.g. `-P=gateway
 * --no-code-cache`): the bench runs the gateway as the task does, and `start_flags_test.ts`
 * keeps the compile tasks on the same ones.
 */
export function startTaskFlags(): string[] {
  const config = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`));
  // The task runs `check --env-only` first, then the gateway: the flags are the last command's.
  const words = String(config.tasks.start).split("&&").at(-1)!.trim().split(/\s+/);
  return words.slice(words.indexOf("run") + 1, words.indexOf("main.ts"));
}

/**
 * The gateway: as `deno task start` runs it (or, with `set` = "gateway-epoll", as `deno task
 * start:epoll` does), ready = HTTP `/ready` 200.
 */
export function gatewayServer(
  dataDir: string,
  denoFlags: string[] = [],
  name = "gateway",
  extraEnv: Record<string, string> = {},
  set: "gateway" | "gateway-epoll" = "gateway",
): ServerDef {
  const flags = startTaskFlags().map((f) => f === "-P=gateway" ? `-P=${set}` : f);
  let starts = 0;
  return {
    name,
    // Ports picked free a moment before the gateway binds them: another process may take one in
    // between (tests run side by side), so a start refused for it is tried again on new ones.
    start: (o) => retryOnPortTaken(() => startOnce(o)),
  };

  async function startOnce(o: LaunchOptions): Promise<Running> {
    const port = freePort();
    const http = freePort();
    // Each start gets an empty store of its own, removed at stop: a scenario's figures do
    // not depend on what earlier scenarios wrote.
    const store = `${dataDir}/${name}-${++starts}`;
    await Deno.mkdir(`${ROOT}${store}`, { recursive: true });
    const env = {
      IGGY_MQTT_LISTENERS_TCP: `127.0.0.1:${port}`,
      IGGY_MQTT_LISTENERS_HTTP: `127.0.0.1:${http}`,
      IGGY_MQTT_LISTENERS_WS: "", // the quick start config binds 8083
      IGGY_MQTT_EMBEDDED_PATH: `${store}/gateway.db`,
      IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "true",
      IGGY_MQTT_LOG_AUTO_CREATE: "true",
      IGGY_MQTT_GATEWAY_LOG_LEVEL: "warn",
      IGGY_MQTT_LIMITS_MAX_CONNECTIONS: "20000",
      // One loopback source opens all 10,000 idle connections: no per-source rate bound.
      IGGY_MQTT_LIMITS_MAX_CONNECTION_RATE_PER_SOURCE: "0",
      ...extraEnv,
    };
    const cmd = [Deno.execPath(), "run", ...flags, ...denoFlags, "main.ts", "run"];
    cmd.push("--config", "config/gateway.toml");
    const running = await spawnUntilReady(name, launchArgv(o, 0, cmd), port, async () => {
      try {
        const r = await fetch(`http://127.0.0.1:${http}/ready`);
        await r.body?.cancel();
        return r.status === 200;
      } catch {
        return false;
      }
    }, { cwd: ROOT, env });
    return {
      ...running,
      metricsUrl: `http://127.0.0.1:${http}/metrics`,
      async stop() {
        await running.stop();
        await Deno.remove(`${ROOT}${store}`, { recursive: true }).catch(() => {});
      },
    };
  }
}

/** `start()`, again on new ports (twice at most) when it failed on an address already in use. */
async function retryOnPortTaken<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1;; attempt++) {
    try {
      return await start();
    } catch (err) {
      if (attempt >= 3 || !String(err).includes("address already in use")) throw err;
    }
  }
}

/** Debian mosquitto with a generated minimal config (no persistence, anonymous). */
export function mosquittoServer(dir: string): ServerDef {
  return {
    name: "mosquitto",
    async start(o) {
      const port = freePort();
      const conf = `${dir}/mosquitto-${port}.conf`;
      await Deno.writeTextFile(
        conf,
        [
          `listener ${port} 127.0.0.1`,
          "allow_anonymous true",
          "persistence false",
          "max_inflight_messages 20",
          "max_queued_messages 1000000",
          "max_connections -1",
          "set_tcp_nodelay true",
          "log_type error",
          "log_dest stderr",
          "",
        ].join("\n"),
      );
      const argv = launchArgv(o, 0, ["/usr/sbin/mosquitto", "-c", conf]);
      return spawnUntilReady("mosquitto", argv, port, connackReady(port));
    },
  };
}

/** The floor server's name in `--servers` and in the report (its gw/floor column). */
export const FLOOR_SERVER = "deno-floor";

/** What the floor can run: its subscribers get every message, and it keeps no sessions. */
export const FLOOR_SCENARIOS = [
  "fleet_qos1",
  "fleet_qos0",
  "e2e",
  "fanout",
  "qos1",
  "qos1_10x2",
  "qos0_1",
  "qos0_10",
];

/**
 * The floor (`floor_server.ts`): the least a durable MQTT server costs on Deno, with the
 * gateway's runtime flags and socket layer; its log file in `dir`.
 */
export function floorServer(dir: string): ServerDef {
  return {
    name: FLOOR_SERVER,
    scenarios: FLOOR_SCENARIOS,
    async start(o) {
      const port = freePort();
      const cmd = [
        Deno.execPath(),
        "run",
        "-A",
        ...startTaskFlags().filter((f) => f.startsWith("--v8-flags")),
        `${ROOT}tests/bench/floor_server.ts`,
        `--port=${port}`,
        `--file=${dir}/floor-${port}.log`,
      ];
      return await spawnUntilReady(FLOOR_SERVER, launchArgv(o, 0, cmd), port, connackReady(port));
    },
  };
}

/**
 * aedes 1.2.0 from npm, default in-memory persistence. Under Node when `node` and `npm` exist
 * (installed once into a cache folder outside the repository): under Deno 2.9.6's `node:net`,
 * aedes loses packet framing on large multi-packet writes ("Invalid header flag bits"), so the
 * QoS 0 scenarios cannot run there. Under Deno otherwise.
 */
export function aedesServer(): ServerDef {
  const viaNode = has("node") && has("npm");
  const cache = `${Deno.env.get("HOME") ?? "/tmp"}/.cache/iggy-mqtt-bench/aedes-1.2.0`;
  return {
    name: "aedes",
    runtime: viaNode ? `node ${sh("node", ["--version"])}` : `deno ${Deno.version.deno}`,
    async start(o) {
      const port = freePort();
      let cmd: string[];
      if (viaNode) {
        try {
          await Deno.stat(`${cache}/node_modules/aedes/package.json`);
        } catch {
          const args = ["install", "--prefix", cache, "--no-audit", "--no-fund", "aedes@1.2.0"];
          const r = await new Deno.Command("npm", { args, stdout: "null", stderr: "piped" })
            .output();
          if (!r.success) throw new Error(`npm install aedes@1.2.0 failed`);
        }
        await Deno.copyFile(`${ROOT}tests/bench/aedes_server.mjs`, `${cache}/aedes_server.mjs`);
        cmd = ["node", `${cache}/aedes_server.mjs`, `--port=${port}`];
      } else {
        cmd = [
          Deno.execPath(),
          "run",
          "-A",
          `${ROOT}tests/bench/aedes_server.mjs`,
          `--port=${port}`,
        ];
      }
      return await spawnUntilReady("aedes", launchArgv(o, 0, cmd), port, connackReady(port), {
        cwd: ROOT,
      });
    },
  };
}

function sh(cmd: string, args: string[]): string {
  try {
    const o = new Deno.Command(cmd, { args, stdout: "piped", stderr: "null" }).outputSync();
    return new TextDecoder().decode(o.stdout).trim();
  } catch {
    return "";
  }
}

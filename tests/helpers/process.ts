/**
 * The gateway as its own process, the way an operator runs it (`deno run -P=gateway main.ts
 * run`, or `-P=gateway-epoll`), on ports chosen by the OS (read back from the "Gateway started" log line).
 *
 * @module
 */
import { waitFor } from "./gateway.ts";

const DENO = Deno.execPath();
const ROOT = new URL("../../", import.meta.url).pathname;

/** A running gateway process. */
export interface GatewayProcess {
  readonly child: Deno.ChildProcess;
  readonly port: number;
  readonly httpPort: number | null;
  /** Everything written to stdout so far (JSON log lines). */
  readonly output: string[];
  /** SIGTERM, then wait for the exit status. */
  stop(): Promise<Deno.CommandStatus>;
}

/**
 * Starts the gateway with `env` overlaid; TCP and HTTP listen on loopback port 0. `set` is the
 * permission set of deno.json to run under (`gateway-epoll` for the epoll socket layer).
 */
export async function spawnGateway(
  env: Record<string, string>,
  set: "gateway" | "gateway-epoll" = "gateway",
): Promise<GatewayProcess> {
  const child = new Deno.Command(DENO, {
    args: ["run", `-P=${set}`, "main.ts", "run"],
    cwd: ROOT,
    env: {
      IGGY_MQTT_LISTENERS_TCP: "127.0.0.1:0",
      IGGY_MQTT_LISTENERS_HTTP: "127.0.0.1:0",
      IGGY_MQTT_LISTENERS_WS: "", // the quick start config binds 8083
      IGGY_MQTT_LIMITS_MAX_CONNECTION_RATE_PER_SOURCE: "0",
      ...env,
    },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output: string[] = [];
  const errors: string[] = [];
  (async () => {
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) output.push(chunk);
  })().catch(() => {});
  (async () => {
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) errors.push(chunk);
  })().catch(() => {});
  let started: { tcp: number; http: number | null } | null = null;
  let exited = false;
  child.status.then(() => exited = true);
  await waitFor(
    () => {
      if (exited) throw new Error("The gateway process exited before it started");
      for (const line of output.join("").split("\n")) {
        if (!line.includes('"Gateway started"')) continue;
        started = JSON.parse(line);
        return true;
      }
      return false;
    },
    60_000,
    "the gateway process to start",
  ).catch((e) => {
    try {
      child.kill("SIGKILL");
    } catch { /* exited */ }
    throw new Error(`${e.message}; stderr: ${errors.join("")}`);
  });
  const s = started!;
  return {
    child,
    port: s.tcp,
    httpPort: s.http,
    output,
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch { /* exited */ }
      return await child.status;
    },
  };
}

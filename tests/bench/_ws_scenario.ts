/**
 * The "ws" scenario: what MQTT over WebSocket costs against TCP on one gateway (`listeners.ws`
 * on), the load in its own process on the other core (`ws_load.ts`):
 *
 * - memory per idle connection: the gateway's RSS with 1,000 idle connections open (MQTT
 *   connected) minus before, per connection, over TCP and over WebSocket;
 * - QoS 1 ingest, 10 connections × 20 in flight, 64-byte payloads: msg/s over TCP and over
 *   WebSocket, alternating, two rounds each; the ratio is WebSocket over TCP.
 *
 * @module
 */
import { freePort, gatewayServer, launchArgv, type LaunchOptions, ROOT } from "./_servers.ts";
import { rssBytes } from "./_stats.ts";

async function load(
  launch: LaunchOptions,
  args: string[],
  onLine?: (line: unknown) => Promise<void>,
): Promise<unknown> {
  const argv = launchArgv(launch, 1, [
    Deno.execPath(),
    "run",
    "-A",
    `${ROOT}tests/bench/ws_load.ts`,
    ...args,
  ]);
  const child = new Deno.Command(argv[0], { args: argv.slice(1), stdout: "piped", stderr: "piped" })
    .spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  let last: unknown = null;
  for (;;) {
    const { value, done } = await lines.read();
    if (done) break;
    text += value;
    let nl;
    while ((nl = text.indexOf("\n")) >= 0) {
      last = JSON.parse(text.slice(0, nl));
      text = text.slice(nl + 1);
      await onLine?.(last);
    }
  }
  const status = await child.status;
  if (!status.success) {
    throw new Error(
      `ws_load.ts ${args.join(" ")} failed: ${await new Response(child.stderr).text()}`,
    );
  }
  return last;
}

/** Runs the scenario; `smoke`: 100 idle connections, 1 s of load. */
export async function wsScenario(
  dataDir: string,
  flags: string[],
  launch: LaunchOptions,
  smoke: boolean,
) {
  const wsPort = freePort();
  const s = await gatewayServer(dataDir, flags, "gateway", {
    IGGY_MQTT_LISTENERS_WS: `127.0.0.1:${wsPort}`,
  }).start(launch);
  const conns = smoke ? 100 : 1000;
  const ms = smoke ? 1000 : 5000;
  try {
    const idle: Record<string, number> = {};
    for (const [transport, port] of [["tcp", s.port], ["ws", wsPort]] as const) {
      await new Promise((r) => setTimeout(r, 1000));
      const before = rssBytes(s.pid);
      await load(launch, [
        "--mode=idle",
        `--transport=${transport}`,
        `--port=${port}`,
        `--conns=${conns}`,
        "--hold-ms=3000",
      ], async () => {
        await new Promise((r) => setTimeout(r, 1500));
        idle[transport] = (rssBytes(s.pid) - before) / conns;
      });
    }
    const rates: Record<string, number[]> = { tcp: [], ws: [] };
    const cpu: Record<string, number[]> = { tcp: [], ws: [] };
    for (let round = 0; round < 2; round++) {
      for (const [transport, port] of [["tcp", s.port], ["ws", wsPort]] as const) {
        const r = await load(launch, [
          "--mode=ingest",
          `--transport=${transport}`,
          `--port=${port}`,
          `--ms=${ms}`,
        ]) as { msgPerSec: number; cpuPercent: number };
        rates[transport].push(r.msgPerSec);
        cpu[transport].push(r.cpuPercent);
      }
    }
    const mean = (x: number[]) => x.reduce((a, b) => a + b, 0) / x.length;
    return {
      idleBytesPerConnTcp: idle.tcp,
      idleBytesPerConnWs: idle.ws,
      ingestTcp: rates.tcp,
      ingestWs: rates.ws,
      loadCpuTcp: cpu.tcp,
      loadCpuWs: cpu.ws,
      wsOverTcp: mean(rates.ws) / mean(rates.tcp),
    };
  } finally {
    await s.stop();
  }
}

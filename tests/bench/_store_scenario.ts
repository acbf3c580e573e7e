/**
 * The "store" scenario: how much RSS the gateway's embedded store costs per GB stored. It
 * builds a small and a large store (build_store.ts), starts the gateway on each twice and
 * reads its RSS once ready. The figure is the difference divided by the difference in size:
 * what opening costs per GB stored, apart from what any non-empty store costs once (the scan's
 * code compiled and optimised, its files opened), which the small store pays too.
 *
 * @module
 */
import { gatewayServer, type LaunchOptions, ROOT } from "./_servers.ts";
import { rssBytes } from "./_stats.ts";

const MiB = 1024 * 1024;

async function buildStore(path: string, bytes: number): Promise<number> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${ROOT}tests/bench/build_store.ts`, `--path=${path}`, `--bytes=${bytes}`],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(`build_store.ts failed: ${new TextDecoder().decode(out.stderr).slice(-1000)}`);
  }
  const line = new TextDecoder().decode(out.stdout).trim().split("\n").at(-1) ?? "{}";
  return JSON.parse(line).segmentBytes;
}

/** RSS (MB) and start-to-ready (ms) of the gateway on `path`: the lower of two starts. */
export async function rssOn(path: string, dataDir: string, flags: string[], launch: LaunchOptions) {
  let rss = Infinity;
  let readyMs = Infinity;
  for (let i = 0; i < 2; i++) {
    const def = gatewayServer(dataDir, flags, "gateway", { IGGY_MQTT_EMBEDDED_PATH: path });
    const s = await def.start(launch);
    try {
      await new Promise((r) => setTimeout(r, 500));
      rss = Math.min(rss, rssBytes(s.pid) / MiB);
      readyMs = Math.min(readyMs, s.readyMs);
    } finally {
      await s.stop();
    }
  }
  return { rss, readyMs };
}

/** Runs the scenario in `dataDir` (relative to the repository, inside the gateway's ./data). */
export async function storeScenario(
  dataDir: string,
  flags: string[],
  launch: LaunchOptions,
  smoke: boolean,
) {
  const small = `${dataDir}/store-small/gateway.db`;
  const large = `${dataDir}/store-large/gateway.db`;
  const smallBytes = await buildStore(small, smoke ? 4 * MiB : 128 * MiB);
  const largeBytes = await buildStore(large, smoke ? 40 * MiB : 1152 * MiB);
  const s = await rssOn(small, dataDir, flags, launch);
  const l = await rssOn(large, dataDir, flags, launch);
  const gb = (largeBytes - smallBytes) / 1024 ** 3;
  return {
    smallBytes,
    largeBytes,
    rssSmallMb: s.rss,
    rssLargeMb: l.rss,
    rssPerGbMb: (l.rss - s.rss) / gb,
    readySmallMs: s.readyMs,
    readyLargeMs: l.readyMs,
  };
}

/**
 * `check`: the free space of the disk that will hold the embedded store's message log, against
 * the reserve the store keeps there (below it, appends are refused: `/ready` says 503).
 *
 * @module
 */
import type { GatewayConfig } from "../config/types.ts";
import { diskRoomLine, loadDiskMeasure } from "../log/embedded/mod.ts";

/** One line in embedded mode (forward mode too) with a store on disk; none otherwise. */
export async function storeDiskLines(config: GatewayConfig): Promise<string[]> {
  const path = config.embedded.path;
  if (config.gateway.backend !== "embedded" || path === ":memory:") return [];
  await loadDiskMeasure().catch(() => {}); // not measurable: the line says so
  return [`embedded.path "${path}": ${diskRoomLine(existingDir(`${path}-log`))}`];
}

/** `dir`, or its nearest existing parent (a store not made yet): where it will be. */
function existingDir(dir: string): string {
  for (
    let d = dir;
    d !== "" && d !== "." && d !== "/";
    d = d.slice(0, Math.max(0, d.lastIndexOf("/")))
  ) {
    try {
      if (Deno.statSync(d).isDirectory) return d;
    } catch { /* not there (yet), or not ours to see: its parent */ }
  }
  return dir.startsWith("/") ? "/" : ".";
}

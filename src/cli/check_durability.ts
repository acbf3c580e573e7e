/**
 * `check` in Iggy mode: which topics the map names outright (the default target and rules
 * without captures) acknowledge sends before they are on Iggy's disk. One line per such
 * topic, read over the login `check_iggy.ts` made.
 *
 * @module
 */
import type { GatewayConfig } from "../config/types.ts";
import { DURABLE_FIX } from "../log/durability_watch.ts";
import type { LogBackend } from "../log/port.ts";
import { type CompiledMap, constantTargets } from "../mapping/mod.ts";

/** Lines to print about the mapped topics' durability (none in embedded mode). */
export async function durabilityLines(
  config: GatewayConfig,
  map: CompiledMap,
  iggy: LogBackend,
): Promise<string[]> {
  if (config.gateway.backend !== "iggy") return [];
  const lines: string[] = [];
  for (const t of constantTargets(map)) {
    const info = await iggy.getTopic(t.stream, t.topic);
    if (info === null) {
      lines.push(
        `${t.stream}/${t.topic}: missing (auto-create makes it with log.auto_create_durability)`,
      );
    } else if (info.acksBeforeDisk) {
      lines.push(
        `WARNING ${t.stream}/${t.topic}: acknowledges sends before they are on disk; a PUBACK means accepted, not stored; ${DURABLE_FIX}`,
      );
    } else lines.push(`${t.stream}/${t.topic}: acknowledges only once on disk`);
  }
  return lines;
}

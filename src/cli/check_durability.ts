/**
 * `check` in Iggy mode: which topics the map names outright (the default target and rules
 * without captures) acknowledge sends before they are on Iggy's disk. One line per such
 * topic; Iggy not reachable → one line saying the durability was not checked (the map and
 * config checks still decide the exit code).
 *
 * @module
 */
import type { GatewayConfig } from "../config/types.ts";
import { createBackend } from "../log/create.ts";
import { DURABLE_FIX } from "../log/durability_watch.ts";
import { type CompiledMap, constantTargets } from "../mapping/mod.ts";

/** Lines to print about the mapped topics' durability (none in embedded mode). */
export async function durabilityLines(
  config: GatewayConfig,
  map: CompiledMap,
): Promise<string[]> {
  if (config.gateway.backend !== "iggy") return [];
  const backend = await createBackend(config);
  try {
    await backend.open();
  } catch (err) {
    return [`durability not checked: ${(err as Error).message}`];
  }
  const lines: string[] = [];
  try {
    for (const t of constantTargets(map)) {
      const info = await backend.getTopic(t.stream, t.topic);
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
  } finally {
    await backend.close();
  }
  return lines;
}

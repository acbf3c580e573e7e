/**
 * Topic mapping (ToMaR): compile the topic map and refuse bad ones, resolve MQTT
 * topics to (stream, topic, partition key) as a pure function (P2, P3), check resolved names
 * against Iggy's rules (P3/P4), and choose partitions with Iggy's own key hash (P5). Reads the
 * gateway's TOML map and Strimzi's `topic-mapping-rules.json`.
 *
 * Imports nothing of ours outside `base/` (UTF-8 lengths, XXH32).
 *
 * ```ts
 * const map = compileMap(await Deno.readTextFile(path), path);
 * const r = resolveTopic(map, "building/north/room/42/temp");
 * const reason = checkResolution(r); // non-null → "denied"
 * const partition = r.partitionKey === null ? null : partitionForKey(r.partitionKey, 3);
 * ```
 *
 * @module
 */

export { MapError } from "./map_error.ts";
export { compileMap } from "./compile.ts";
export type { CompiledMap, CompiledRule, Resolution } from "./types.ts";
export { resolveTopic } from "./resolve.ts";
export { checkResolution, isValidIggyName } from "./names.ts";
export { partitionForKey } from "./key_partition.ts";
export { constantTargets, type Target } from "./targets.ts";
export { filterMatches, filterProblem, isWildcardFilter } from "./filter.ts";
export { type FilterTarget, type NameSpec, resolveFilter } from "./filter_resolve.ts";

/**
 * The `explain --json` line: one object per topic, keys in snake_case as printed.
 *
 * @module
 */

import type { CompiledMap } from "./types.ts";
import { resolveTopic } from "./resolve.ts";

/** One line of `explain --json` output. */
export interface ExplainLine {
  /** The MQTT topic as given. */
  topic: string;
  /** 1-based rule number, or `null` when the defaults applied. */
  rule: number | null;
  stream: string;
  iggy_topic: string;
  partition_key: string | null;
}

/** Resolves `topic` (P2, P3) and shapes it as an `explain --json` line. */
export function explainJson(map: CompiledMap, topic: string): ExplainLine {
  const r = resolveTopic(map, topic);
  return {
    topic,
    rule: r.rule,
    stream: r.stream,
    iggy_topic: r.topic,
    partition_key: r.partitionKey,
  };
}

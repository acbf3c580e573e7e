/**
 * Reads the gateway's own map format, `config/topic-map.toml`.
 *
 * ```toml
 * default_stream = "sensors"
 * default_topic  = "messages_default"
 * [[rule]]
 * mqtt_topic    = 'building/(\w+)/room/(\d+)/.*'
 * stream        = 'building_$1'
 * topic         = 'telemetry'
 * partition_key = 'room_$2'   # optional
 * ```
 *
 * @module
 */

import { parse } from "smol-toml";
import { MapError } from "./map_error.ts";
import {
  isRecord,
  optionalString,
  type RawMap,
  type RawRule,
  refuseUnknownKeys,
  requireString,
} from "./raw_map.ts";

const FILE_KEYS = ["default_stream", "default_topic", "rule"] as const;
const RULE_KEYS = ["mqtt_topic", "stream", "topic", "partition_key"] as const;

function readRule(table: unknown, index: number, source: string): RawRule {
  if (!isRecord(table)) {
    throw new MapError(source, index, "rule", "must be a table");
  }
  refuseUnknownKeys(table, RULE_KEYS, source, index);
  return {
    index,
    pattern: requireString(table, "mqtt_topic", source, index),
    stream: requireString(table, "stream", source, index),
    topic: requireString(table, "topic", source, index),
    partitionKey: optionalString(table, "partition_key", source, index),
  };
}

/** Parses TOML map text into a {@link RawMap}; throws {@link MapError}. */
export function readTomlMap(text: string, source: string): RawMap {
  let doc: Record<string, unknown>;
  try {
    doc = parse(text);
  } catch (e) {
    throw new MapError(source, null, "file", `is not valid TOML: ${(e as Error).message}`, {
      cause: e,
    });
  }
  refuseUnknownKeys(doc, FILE_KEYS, source, null);
  const rules = doc.rule ?? [];
  if (!Array.isArray(rules)) {
    throw new MapError(source, null, "rule", "must be an array of tables: write [[rule]]");
  }
  return {
    source,
    defaultStream: requireString(doc, "default_stream", source, null),
    defaultTopic: requireString(doc, "default_topic", source, null),
    rules: rules.map((table, i) => readRule(table, i + 1, source)),
  };
}

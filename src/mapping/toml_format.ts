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
import { parseErrorLine } from "../base/parse_error.ts";
import { MapError } from "./map_error.ts";
import { type RawMap, RawRecord, type RawRule } from "./raw_map.ts";

const FILE_KEYS = ["default_stream", "default_topic", "rule"] as const;
const RULE_KEYS = ["mqtt_topic", "stream", "topic", "partition_key"] as const;

function readRule(table: unknown, index: number, source: string): RawRule {
  const rule = RawRecord.of(table, RULE_KEYS, source, index, "must be a table");
  return {
    index,
    pattern: rule.require("mqtt_topic"),
    stream: rule.require("stream"),
    topic: rule.require("topic"),
    partitionKey: rule.optional("partition_key"),
  };
}

/** Parses TOML map text into a {@link RawMap}; throws {@link MapError}. */
export function readTomlMap(text: string, source: string): RawMap {
  let doc: Record<string, unknown>;
  try {
    doc = parse(text);
  } catch (e) {
    throw new MapError(source, null, "file", `is not valid TOML: ${parseErrorLine(e)}`, {
      cause: e,
    });
  }
  const file = RawRecord.of(doc, FILE_KEYS, source, null, "must be a table");
  const rules = doc.rule ?? [];
  if (!Array.isArray(rules)) {
    throw new MapError(source, null, "rule", "must be an array of tables: write [[rule]]");
  }
  return {
    source,
    defaultStream: file.require("default_stream"),
    defaultTopic: file.require("default_topic"),
    rules: rules.map((table, i) => readRule(table, i + 1, source)),
  };
}

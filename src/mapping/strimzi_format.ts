/**
 * Reads a Strimzi MQTT bridge `topic-mapping-rules.json`, so Strimzi users move over unchanged:
 * a JSON array of `{ "mqttTopic", "kafkaTopic", "kafkaKey"? }`.
 *
 * Translation, faithful to the bridge's regex mapper:
 * - `mqttTopic` is a regular expression matched against the whole topic (Java `matches()`),
 *   exactly as our `mqtt_topic`.
 * - `kafkaTopic` becomes the Iggy topic template, `kafkaKey` the partition-key template; both
 *   use `$n` for capture group n, as ours do (see template.ts for `$12`, `${n}`, `$$`).
 * - Strimzi has no streams: every rule's stream is the default stream (`options.defaultStream`,
 *   "sensors" unless given); the default topic is Strimzi's `messages_default` unless given.
 * - A missing or `null` `kafkaKey` means no key (balanced partitioning), as in Strimzi.
 *
 * @module
 */

import { MapError } from "./map_error.ts";
import { parseErrorLine } from "../base/parse_error.ts";
import { type RawMap, RawRecord, type RawRule } from "./raw_map.ts";
import { literalTemplate } from "./template.ts";

/** Stream for Strimzi maps when the caller gives none. */
export const STRIMZI_DEFAULT_STREAM = "sensors";
/** Strimzi's `bridge.topic.default` default. */
export const STRIMZI_DEFAULT_TOPIC = "messages_default";

const RULE_KEYS = ["mqttTopic", "kafkaTopic", "kafkaKey"] as const;
const RULE_MUST_BE = "must be an object with mqttTopic, kafkaTopic and optional kafkaKey";

/** Defaults a Strimzi map needs from outside the file. */
export interface StrimziOptions {
  readonly defaultStream?: string;
  readonly defaultTopic?: string;
}

function readRule(entry: unknown, index: number, source: string, stream: string): RawRule {
  const rule = RawRecord.of(entry, RULE_KEYS, source, index, RULE_MUST_BE);
  return {
    index,
    pattern: rule.require("mqttTopic"),
    // The stream is a constant, so any "$" in it is literal.
    stream: { key: "default_stream", value: literalTemplate(stream) },
    topic: rule.require("kafkaTopic"),
    partitionKey: rule.optional("kafkaKey"),
  };
}

/** Parses Strimzi JSON map text into a {@link RawMap}; throws {@link MapError}. */
export function readStrimziMap(text: string, source: string, options: StrimziOptions): RawMap {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new MapError(source, null, "file", `is not valid JSON: ${parseErrorLine(e)}`, {
      cause: e,
    });
  }
  if (!Array.isArray(doc)) {
    throw new MapError(source, null, "file", "must be a JSON array of mapping rules");
  }
  const stream = options.defaultStream ?? STRIMZI_DEFAULT_STREAM;
  return {
    source,
    defaultStream: { key: "default_stream", value: stream },
    defaultTopic: { key: "default_topic", value: options.defaultTopic ?? STRIMZI_DEFAULT_TOPIC },
    rules: doc.map((entry, i) => readRule(entry, i + 1, source, stream)),
  };
}

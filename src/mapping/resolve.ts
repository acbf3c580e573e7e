/**
 * P2 + P3: MQTT topic → (stream, topic, partition key). A pure function of (map, topic): no
 * I/O, no clock, no state (regexes carry no "g"/"y" flag, so `exec` keeps no `lastIndex`).
 *
 * @module
 */

import { expandTemplate } from "./template.ts";
import type { CompiledMap, Resolution } from "./types.ts";

/**
 * Resolves an MQTT topic. P2: the first rule, in file order, whose pattern matches the WHOLE
 * topic. P3: its templates filled from the captures; no match gives the default stream and
 * topic with no key. Never throws for a map from `compileMap()`.
 */
export function resolveTopic(map: CompiledMap, mqttTopic: string): Resolution {
  for (const rule of map.rules) {
    const match = rule.regex.exec(mqttTopic);
    if (match === null) continue;
    const t = rule.templates;
    return {
      rule: rule.index,
      stream: expandTemplate(t.stream, match),
      topic: expandTemplate(t.topic, match),
      partitionKey: t.partitionKey === null ? null : expandTemplate(t.partitionKey, match),
    };
  }
  return { rule: null, stream: map.defaultStream, topic: map.defaultTopic, partitionKey: null };
}

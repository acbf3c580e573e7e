/**
 * P2 + P3: MQTT topic → (stream, topic, partition key). A pure function of (map, topic): no
 * I/O, no clock, no state (regexes carry no "g"/"y" flag, so `exec` keeps no `lastIndex`).
 *
 * @module
 */

import type { CompiledMap, CompiledRule } from "./compile.ts";
import { expandTemplate, parseTemplate, type TemplatePart } from "./template.ts";

/** Where one MQTT topic goes. Names are not validated here: see `checkResolution()`. */
export interface Resolution {
  /** 1-based number of the rule that matched, or `null` when the defaults applied. */
  readonly rule: number | null;
  readonly stream: string;
  readonly topic: string;
  /** `null` means balanced partitioning (no key). */
  readonly partitionKey: string | null;
}

/** Parsed templates of one compiled rule. */
export interface RuleTemplates {
  readonly stream: readonly TemplatePart[];
  readonly topic: readonly TemplatePart[];
  readonly partitionKey: readonly TemplatePart[] | null;
}

// Parsed templates, attached by compileMap() so resolving never re-parses. A WeakMap keeps
// CompiledRule a plain, printable object and lets the map be garbage-collected on reload.
const parsedTemplates = new WeakMap<CompiledRule, RuleTemplates>();

/** Records the parsed templates of a rule built by `compileMap()`. */
export function rememberTemplates(rule: CompiledRule, templates: RuleTemplates): void {
  parsedTemplates.set(rule, templates);
}

function parseOrLiteral(template: string): readonly TemplatePart[] {
  return parseTemplate(template, Number.MAX_SAFE_INTEGER).parts ?? [template];
}

function templatesOf(rule: CompiledRule): RuleTemplates {
  let templates = parsedTemplates.get(rule);
  if (templates === undefined) { // a rule not built by compileMap(): parse once, best effort
    templates = {
      stream: parseOrLiteral(rule.stream),
      topic: parseOrLiteral(rule.topic),
      partitionKey: rule.partitionKey === null ? null : parseOrLiteral(rule.partitionKey),
    };
    parsedTemplates.set(rule, templates);
  }
  return templates;
}

/**
 * Resolves an MQTT topic. P2: the first rule, in file order, whose pattern matches the WHOLE
 * topic. P3: its templates filled from the captures; no match gives the default stream and
 * topic with no key. Never throws for a map from `compileMap()`.
 */
export function resolveTopic(map: CompiledMap, mqttTopic: string): Resolution {
  for (const rule of map.rules) {
    const match = rule.regex.exec(mqttTopic);
    if (match === null) continue;
    const t = templatesOf(rule);
    return {
      rule: rule.index,
      stream: expandTemplate(t.stream, match),
      topic: expandTemplate(t.topic, match),
      partitionKey: t.partitionKey === null ? null : expandTemplate(t.partitionKey, match),
    };
  }
  return { rule: null, stream: map.defaultStream, topic: map.defaultTopic, partitionKey: null };
}

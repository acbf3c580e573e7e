/**
 * Compiles a topic map once at start (and on SIGHUP), refusing any map that could misroute or
 * produce names Iggy cannot hold: the gateway refuses to start on a bad map.
 *
 * @module
 */

import { MapError } from "./map_error.ts";
import { utf8Length } from "../base/utf8.ts";
import { isValidIggyName, quoteName } from "./names.ts";
import { compilePattern } from "./pattern.ts";
import type { RawField, RawMap, RawRule } from "./raw_map.ts";
import { readStrimziMap, type StrimziOptions } from "./strimzi_format.ts";
import { constantOf, literalText, parseTemplate, type TemplatePart } from "./template.ts";
import { readTomlMap } from "./toml_format.ts";
import type { CompiledMap, CompiledRule, RuleTemplates } from "./types.ts";

/** Defaults for formats that do not carry them (Strimzi JSON). */
export interface CompileOptions extends StrimziOptions {}

function checkDefault(field: RawField, source: string): string {
  if (!isValidIggyName(field.value)) {
    throw new MapError(
      source,
      null,
      field.key,
      `${quoteName(field.value)} is not a valid Iggy name (1-255 bytes)`,
    );
  }
  return field.value;
}

/** Parses one template and refuses what can never resolve to a valid name. */
function compileTemplate(
  field: RawField,
  groupCount: number,
  what: "name" | "messages key",
  source: string,
  rule: number,
): readonly TemplatePart[] {
  const parsed = parseTemplate(field.value, groupCount);
  if (parsed.problem !== undefined) throw new MapError(source, rule, field.key, parsed.problem);
  const constant = constantOf(parsed.parts);
  if (constant !== null && !isValidIggyName(constant)) {
    throw new MapError(
      source,
      rule,
      field.key,
      `${quoteName(constant)} is not a valid Iggy ${what} (1-255 bytes)`,
    );
  }
  if (utf8Length(literalText(parsed.parts)) > 255) {
    throw new MapError(source, rule, field.key, "always expands to more than 255 bytes");
  }
  return parsed.parts;
}

function compileRule(raw: RawRule, source: string): CompiledRule {
  if (raw.pattern.value === "") {
    throw new MapError(source, raw.index, raw.pattern.key, "is empty");
  }
  const compiled = compilePattern(raw.pattern.value);
  if (compiled.problem !== undefined) {
    throw new MapError(source, raw.index, raw.pattern.key, compiled.problem);
  }
  const { regex, groupCount } = compiled;
  const templates: RuleTemplates = Object.freeze({
    stream: compileTemplate(raw.stream, groupCount, "name", source, raw.index),
    topic: compileTemplate(raw.topic, groupCount, "name", source, raw.index),
    partitionKey: raw.partitionKey === null
      ? null
      : compileTemplate(raw.partitionKey, groupCount, "messages key", source, raw.index),
  });
  return Object.freeze({
    index: raw.index,
    pattern: raw.pattern.value,
    regex,
    stream: raw.stream.value,
    topic: raw.topic.value,
    partitionKey: raw.partitionKey?.value ?? null,
    templates,
  });
}

/** Compiles a {@link RawMap}: defaults first, then every rule in file order. */
export function compileRawMap(raw: RawMap): CompiledMap {
  const defaultStream = checkDefault(raw.defaultStream, raw.source);
  const defaultTopic = checkDefault(raw.defaultTopic, raw.source);
  const rules = Object.freeze(raw.rules.map((r) => compileRule(r, raw.source)));
  return Object.freeze({ source: raw.source, defaultStream, defaultTopic, rules });
}

/**
 * Compiles map text. A `source` ending in `.json` is read as a Strimzi
 * `topic-mapping-rules.json`; anything else as the gateway's TOML format (`toml_format.ts`).
 *
 * `options.defaultStream` / `options.defaultTopic` apply to Strimzi JSON only (defaults
 * "sensors" and "messages_default"); a TOML map must state both itself.
 *
 * @param text the file's contents
 * @param source the path (or a label) used to choose the format and in every message
 * @throws {MapError} naming the rule and key for every refusal
 */
export function compileMap(
  text: string,
  source: string,
  options: CompileOptions = {},
): CompiledMap {
  const raw = source.toLowerCase().endsWith(".json")
    ? readStrimziMap(text, source, options)
    : readTomlMap(text, source);
  return compileRawMap(raw);
}

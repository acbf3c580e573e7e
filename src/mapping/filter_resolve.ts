/**
 * A wildcard filter against the topic map: which targets can hold a
 * message whose topic matches the filter. Per rule: can some topic that matches the filter also
 * match the rule's pattern? When that cannot be decided, the answer is yes. Pure.
 *
 * How it decides, soundly where it says no:
 * - A rule is left out only when the filter's literal prefix and the pattern's literal prefix
 *   disagree (neither is a prefix of the other): no topic can start with both.
 * - Otherwise concrete probe topics are built from the filter (its wildcards replaced by sample
 *   levels). A name template (stream, topic, key) that expands to the same text for every probe
 *   the rule matches is taken as fixed by the filter; one that varies, or a rule no probe
 *   matches (undecided), is left open: a name pattern for the stream and topic (the caller
 *   matches existing targets against it), every partition for the key.
 *
 * @module
 */
import { filterLiteralPrefix, isWildcardFilter } from "./filter.ts";
import { resolveTopic } from "./resolve.ts";
import { expandTemplate, type TemplatePart } from "./template.ts";
import type { CompiledMap, CompiledRule } from "./types.ts";

/** A stream or topic name: fixed by the filter, or any existing name matching a pattern. */
export type NameSpec = { readonly name: string } | { readonly pattern: RegExp };

/** Where messages matching a filter may live under one rule (or the defaults). */
export interface FilterTarget {
  /** 1-based rule, or null for the default target. */
  readonly rule: number | null;
  readonly stream: NameSpec;
  readonly topic: NameSpec;
  /** A key the filter fixes (one partition), or null: every partition. */
  readonly partitionKey: string | null;
}

/** Sample levels standing in for "+"; varied so captures that depend on them vary too. */
const PLUS_PROBES = ["0", "a", "Z_9", "x-1", "42", "q"];
/** Sample level runs standing in for "#" ("" = zero levels: "a/#" matches "a"). */
const HASH_PROBES = ["0/0", "a", "1/x/y", "", "Z_9/0/a", "42/t", "b/2", "0"];
const PROBE_VARIANTS = 8;

/**
 * Every target a message matching `filter` can live in, default target included, each once.
 * An exact filter (no wildcard) resolves like a PUBLISH topic: one target.
 */
export function resolveFilter(map: CompiledMap, filter: string): FilterTarget[] {
  if (!isWildcardFilter(filter)) {
    const r = resolveTopic(map, filter);
    return [{
      rule: r.rule,
      stream: { name: r.stream },
      topic: { name: r.topic },
      partitionKey: r.partitionKey,
    }];
  }
  const probes = probeTopics(filter);
  const prefix = filterLiteralPrefix(filter);
  const out: FilterTarget[] = [];
  for (const rule of map.rules) {
    if (!prefixesAgree(prefix, patternLiteralPrefix(rule.pattern))) continue;
    out.push(ruleTarget(rule, probes));
  }
  out.push({
    rule: null,
    stream: { name: map.defaultStream },
    topic: { name: map.defaultTopic },
    partitionKey: null,
  });
  return out;
}

/** The rule's target for the probes: fixed names where every matching probe agrees. */
function ruleTarget(rule: CompiledRule, probes: readonly string[]): FilterTarget {
  const matches: RegExpExecArray[] = [];
  for (const p of probes) {
    const m = rule.regex.exec(p);
    if (m !== null) matches.push(m);
  }
  const t = rule.templates;
  const key = t.partitionKey === null ? null : fixedText(t.partitionKey, matches);
  return {
    rule: rule.index,
    stream: nameSpec(t.stream, matches),
    topic: nameSpec(t.topic, matches),
    partitionKey: key,
  };
}

function nameSpec(parts: readonly TemplatePart[], matches: RegExpExecArray[]): NameSpec {
  const fixed = fixedText(parts, matches);
  return fixed !== null ? { name: fixed } : { pattern: templatePattern(parts) };
}

/** The template's one expansion over every match, or null when it varies or too few matched. */
function fixedText(parts: readonly TemplatePart[], matches: RegExpExecArray[]): string | null {
  if (parts.length === 1 && typeof parts[0] === "string") return parts[0];
  // One matching probe cannot tell a fixed capture from one that happened to fit it.
  if (matches.length < 2) return null;
  const first = expandTemplate(parts, matches[0]);
  for (let i = 1; i < matches.length; i++) {
    if (expandTemplate(parts, matches[i]) !== first) return null;
  }
  return first;
}

/** A regex every expansion of the template matches: literals as written, captures as any text. */
function templatePattern(parts: readonly TemplatePart[]): RegExp {
  const body = parts.map((p) => typeof p === "string" ? escapeRegex(p) : ".*").join("");
  return new RegExp(`^${body}$`, "u");
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&");
}

/** Concrete topics matching the filter, its wildcards replaced by varied sample levels. */
export function probeTopics(filter: string): string[] {
  const levels = filter.split("/");
  const out = new Set<string>();
  for (let v = 0; v < PROBE_VARIANTS; v++) {
    const parts: string[] = [];
    for (let i = 0; i < levels.length; i++) {
      const level = levels[i];
      if (level === "+") parts.push(PLUS_PROBES[(v + i * 3) % PLUS_PROBES.length]);
      else if (level === "#") {
        const rest = HASH_PROBES[(v + i) % HASH_PROBES.length];
        if (rest !== "") parts.push(rest);
      } else parts.push(level);
    }
    // "#" alone with zero levels would be the empty topic, which no PUBLISH has.
    if (parts.length > 0) out.add(parts.join("/"));
  }
  return [...out];
}

/** Whether some text can start with both prefixes. */
function prefixesAgree(a: string, b: string): boolean {
  return a.startsWith(b) || b.startsWith(a);
}

/**
 * Literal text every topic the pattern matches starts with ("" when unsure): the pattern's
 * leading plain characters, without one a quantifier makes optional. A pattern with a "|"
 * outside any group is given "" (its other alternative may start elsewhere).
 */
export function patternLiteralPrefix(pattern: string): string {
  if (hasTopLevelAlternation(pattern)) return "";
  let out = "";
  let i = pattern.startsWith("^") ? 1 : 0;
  while (i < pattern.length) {
    const ch = pattern[i];
    let lit: string | null = null;
    let width = 1;
    if (ch === "\\") {
      const next = pattern[i + 1] ?? "";
      if (/[/.\-_$^*+?()[\]{}|\\]/.test(next)) lit = next;
      width = 2;
    } else if (!/[.*+?()[\]{}|^$]/.test(ch)) lit = ch;
    if (lit === null) break;
    const after = pattern[i + width];
    if (after === "?" || after === "*" || after === "{") break; // optional or repeated
    out += lit;
    i += width;
  }
  return out;
}

/** Whether a "|" stands outside every group and character class. */
function hasTopLevelAlternation(pattern: string): boolean {
  let depth = 0;
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i];
    if (ch === "\\") i++;
    else if (inClass) inClass = ch !== "]";
    else if (ch === "[") inClass = true;
    else if (ch === "(") depth++;
    else if (ch === ")") depth--;
    else if (ch === "|" && depth === 0) return true;
  }
  return false;
}

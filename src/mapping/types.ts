/**
 * The shapes compiling hands to resolving: a compiled map, its rules (each carrying its parsed
 * templates, so resolving never re-parses), and what a resolution returns.
 *
 * @module
 */

import type { TemplatePart } from "./template.ts";

/** Parsed templates of one compiled rule. */
export interface RuleTemplates {
  readonly stream: readonly TemplatePart[];
  readonly topic: readonly TemplatePart[];
  readonly partitionKey: readonly TemplatePart[] | null;
}

/** One compiled rule; templates keep their written form (`building_$1`) beside the parsed one. */
export interface CompiledRule {
  /** 1-based position in the file; first full match in this order wins (P2). */
  readonly index: number;
  /** The pattern as written. */
  readonly pattern: string;
  /** `^(?:pattern)$` with the "u" flag: matches the whole topic, stateless. */
  readonly regex: RegExp;
  /** Stream template. */
  readonly stream: string;
  /** Iggy topic template. */
  readonly topic: string;
  /** Partition-key template; `null` means balanced partitioning. */
  readonly partitionKey: string | null;
  /** The three templates, parsed and checked by `compileMap()`. */
  readonly templates: RuleTemplates;
}

/** A compiled, immutable topic map. Build it only with `compileMap()`. */
export interface CompiledMap {
  readonly source: string;
  /** Stream for topics no rule matches (P3). */
  readonly defaultStream: string;
  /** Iggy topic for topics no rule matches (P3). */
  readonly defaultTopic: string;
  readonly rules: readonly CompiledRule[];
}

/** Where one MQTT topic goes. Names are not validated here: see `checkResolution()`. */
export interface Resolution {
  /** 1-based number of the rule that matched, or `null` when the defaults applied. */
  readonly rule: number | null;
  readonly stream: string;
  readonly topic: string;
  /** `null` means balanced partitioning (no key). */
  readonly partitionKey: string | null;
}

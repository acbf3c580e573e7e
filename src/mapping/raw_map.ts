/**
 * The uncompiled shape both map formats are read into, keeping each value's key as spelled in
 * its file so that every refusal names what the operator wrote, and the reader of a file's
 * records both formats share.
 *
 * @module
 */

import { MapError } from "./map_error.ts";

/** One value from the file, with the key it was written under. */
export interface RawField {
  readonly key: string;
  readonly value: string;
}

/** One rule as read, before compiling. `index` is 1-based, in file order. */
export interface RawRule {
  readonly index: number;
  readonly pattern: RawField;
  readonly stream: RawField;
  readonly topic: RawField;
  readonly partitionKey: RawField | null;
}

/** A whole map as read, before compiling. */
export interface RawMap {
  readonly source: string;
  readonly defaultStream: RawField;
  readonly defaultTopic: RawField;
  readonly rules: readonly RawRule[];
}

/** Describes a value's type for messages: `number`, `array`, `table`, `null`, … */
function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (value instanceof Date) return "date";
  return typeof value === "object" ? "table" : typeof value;
}

/** A plain object (TOML table or JSON object), not an array or date. */
function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) &&
    !(value instanceof Date);
}

/**
 * One record of a map file (a TOML table or a JSON object) whose string values are read with
 * where it stands, so that each refusal names it: `rule` is the record's 1-based rule number,
 * or null for the file level.
 */
export class RawRecord {
  readonly #fields: Record<string, unknown>;
  readonly #source: string;
  readonly #rule: number | null;

  private constructor(fields: Record<string, unknown>, source: string, rule: number | null) {
    this.#fields = fields;
    this.#source = source;
    this.#rule = rule;
  }

  /**
   * `value` as a record, refused when it is not one (`mustBe` says what it must be) or when it
   * has a key outside `allowed` (a misspelt `partiton_key` must not silently mean "no key").
   */
  static of(
    value: unknown,
    allowed: readonly string[],
    source: string,
    rule: number | null,
    mustBe: string,
  ): RawRecord {
    if (!isRecord(value)) throw new MapError(source, rule, rule === null ? "file" : "rule", mustBe);
    for (const key of Object.keys(value)) {
      if (!allowed.includes(key)) {
        throw new MapError(
          source,
          rule,
          key,
          `unknown key ${JSON.stringify(key)} (allowed: ${allowed.join(", ")})`,
        );
      }
    }
    return new RawRecord(value, source, rule);
  }

  /** A required string value, refusing a missing key or a non-string value. */
  require(key: string): RawField {
    const value = this.#fields[key];
    if (value === undefined) throw new MapError(this.#source, this.#rule, key, "is missing");
    if (typeof value !== "string") {
      throw new MapError(this.#source, this.#rule, key, `must be a string, got ${typeName(value)}`);
    }
    return { key, value };
  }

  /** An optional string value; absent (or JSON `null`) gives `null`. */
  optional(key: string): RawField | null {
    const value = this.#fields[key];
    return value === undefined || value === null ? null : this.require(key);
  }
}

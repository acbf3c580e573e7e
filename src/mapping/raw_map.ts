/**
 * The uncompiled shape both map formats are read into, keeping each value's key as spelled in
 * its file so that every refusal names what the operator wrote.
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
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) &&
    !(value instanceof Date);
}

/**
 * Refuses keys outside `allowed` (a misspelt `partiton_key` must not silently mean "no key").
 * `rule` is the 1-based rule number, or null for the file level.
 */
export function refuseUnknownKeys(
  record: Record<string, unknown>,
  allowed: readonly string[],
  source: string,
  rule: number | null,
): void {
  for (const key of Object.keys(record)) {
    if (!allowed.includes(key)) {
      throw new MapError(
        source,
        rule,
        key,
        `unknown key ${JSON.stringify(key)} (allowed: ${allowed.join(", ")})`,
      );
    }
  }
}

/** Reads a required string value, refusing a missing key or a non-string value. */
export function requireString(
  record: Record<string, unknown>,
  key: string,
  source: string,
  rule: number | null,
): RawField {
  const value = record[key];
  if (value === undefined) throw new MapError(source, rule, key, "is missing");
  if (typeof value !== "string") {
    throw new MapError(source, rule, key, `must be a string, got ${typeName(value)}`);
  }
  return { key, value };
}

/** Reads an optional string value; absent (or JSON `null`) gives `null`. */
export function optionalString(
  record: Record<string, unknown>,
  key: string,
  source: string,
  rule: number | null,
): RawField | null {
  if (record[key] === undefined || record[key] === null) return null;
  return requireString(record, key, source, rule);
}

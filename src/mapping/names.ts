/**
 * Iggy name rules, applied to resolved names (P3/P4) and to constant templates at compile time.
 *
 * @module
 */

import { utf8Length } from "../base/utf8.ts";
import type { Resolution } from "./types.ts";

/** Iggy's bound on stream, topic and messages-key lengths, in UTF-8 bytes. */
export const MAX_NAME_BYTES = 255;

/** How much of a bad name a reason string shows; the rest is elided so logs stay short. */
const SHOWN_CHARS = 80;

/**
 * Whether `name` is a valid Iggy stream, topic or messages-key value: any well-formed UTF-8,
 * 1–255 bytes, case-sensitive, no character restrictions.
 */
export function isValidIggyName(name: string): boolean {
  // A lone surrogate has no faithful UTF-8 form (an encoder writes U+FFFD instead): refused.
  if (!name.isWellFormed()) return false;
  const bytes = utf8Length(name);
  return bytes >= 1 && bytes <= MAX_NAME_BYTES;
}

/** Quotes a name for a message: JSON escaping (control characters stay visible), long names elided. */
export function quoteName(name: string): string {
  const shown = name.length > SHOWN_CHARS ? `${name.slice(0, SHOWN_CHARS)}…` : name;
  return JSON.stringify(shown);
}

/**
 * Checks the names a resolution produced. `resolveTopic()` is pure and never validates; the
 * caller runs this before any backend call and turns a non-null reason into a `denied` outcome
 * (P3: a resolved name that is not a valid Iggy name is a denial, not a crash; P4).
 *
 * @returns `null` when stream, topic and (when present) key are valid, else the reason, e.g.
 *   `resolved stream "" is not a valid Iggy name (1-255 bytes)`.
 */
export function checkResolution(r: Resolution): string | null {
  if (!isValidIggyName(r.stream)) {
    return `resolved stream ${quoteName(r.stream)} is not a valid Iggy name (1-255 bytes)`;
  }
  if (!isValidIggyName(r.topic)) {
    return `resolved topic ${quoteName(r.topic)} is not a valid Iggy name (1-255 bytes)`;
  }
  if (r.partitionKey !== null && !isValidIggyName(r.partitionKey)) {
    return `resolved partition key ${
      quoteName(r.partitionKey)
    } is not a valid Iggy messages key (1-255 bytes)`;
  }
  return null;
}

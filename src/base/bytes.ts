/**
 * Byte-array concatenation, shared by the outbox, the Iggy client's frame reader and tests.
 *
 * @module
 */

/**
 * The parts back to back in one new array; a single part is returned as it is (callers that
 * write into the result must copy it). `total` is the summed length when the caller knows it.
 */
export function concatBytes(parts: readonly Uint8Array[], total?: number): Uint8Array {
  if (parts.length === 1) return parts[0];
  let n = total ?? 0;
  if (total === undefined) { for (const p of parts) n += p.length; }
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

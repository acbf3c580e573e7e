/**
 * Just enough DER (X.690) to read the fields revocation needs from a certificate and a CRL:
 * tag-length-value elements, walked in place over the bytes. Anything that is not well-formed
 * DER throws; callers turn that into an operator error (a CRL file) or a refusal (a peer).
 *
 * @module
 */

/** One DER element: its tag, and where its content lies in the bytes. */
export interface DerElement {
  readonly tag: number;
  /** First byte of the content. */
  readonly start: number;
  /** One past the last byte of the content. */
  readonly end: number;
  /** One past the whole element (header included): where the next sibling starts. */
  readonly next: number;
}

/** DER tags used here. */
export const Tag = Object.freeze({
  INTEGER: 0x02,
  SEQUENCE: 0x30,
  UTC_TIME: 0x17,
  GENERALIZED_TIME: 0x18,
  CONTEXT_0: 0xa0,
});

/** The element at `at`, which must end by `limit`. */
export function readElement(b: Uint8Array, at: number, limit = b.length): DerElement {
  if (at + 2 > limit) throw new Error("DER element cut short");
  const tag = b[at];
  let len = b[at + 1];
  let start = at + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4 || start + n > limit) throw new Error("DER length not usable");
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + b[start + i];
    start += n;
  }
  const end = start + len;
  if (end > limit) throw new Error("DER element runs past its container");
  return { tag, start, end, next: end };
}

/** The children of a constructed element, in order. */
export function childrenOf(b: Uint8Array, e: DerElement): DerElement[] {
  const out: DerElement[] = [];
  for (let at = e.start; at < e.end;) {
    const child = readElement(b, at, e.end);
    out.push(child);
    at = child.next;
  }
  return out;
}

/** The element's whole encoding (header and content) as hex: a comparable key. */
export function hexOfElement(b: Uint8Array, at: number, e: DerElement): string {
  return hex(b.subarray(at, e.next));
}

/** An INTEGER's value as upper-case hex without leading zero bytes (as serials are shown). */
export function integerHex(b: Uint8Array, e: DerElement): string {
  if (e.tag !== Tag.INTEGER) throw new Error("expected a DER INTEGER");
  let s = e.start;
  while (s < e.end - 1 && b[s] === 0) s++;
  return hex(b.subarray(s, e.end)).toUpperCase();
}

function hex(b: Uint8Array): string {
  let s = "";
  for (const x of b) s += x.toString(16).padStart(2, "0");
  return s;
}

/**
 * UTF-8 encoding and length, the one copy for the process. Both agree with `TextEncoder` for
 * every string, well-formed or not: a lone surrogate is written as U+FFFD (3 bytes).
 * Whether a string is well-formed is a separate question (`String.prototype.isWellFormed`).
 *
 * @module
 */

const encoder = new TextEncoder();

/** UTF-8 bytes of a string (`TextEncoder`: a lone surrogate becomes U+FFFD). */
export function utf8(s: string): Uint8Array<ArrayBuffer> {
  return encoder.encode(s);
}

/** Byte length of `utf8(s)`, counted without allocating an encoded copy. */
export function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && isLowSurrogate(s.charCodeAt(i + 1))) {
      n += 4; // a surrogate pair: one code point above U+FFFF
      i++;
    } else n += 3; // the rest of the BMP, and a lone surrogate (U+FFFD)
  }
  return n;
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff; // NaN past the end is not
}

/** Longest string {@link shortAscii} decodes itself. */
const SHORT_ASCII_MAX = 64;

/**
 * `bytes[start, end)` as a string when it is short and all ASCII (every byte < 0x80: the same
 * string any UTF-8 decoder gives), else null for the caller's decoder. Header keys, topics and
 * most header values are short ASCII, and a loop beats a TextDecoder call for them.
 */
export function shortAscii(bytes: Uint8Array, start: number, end: number): string | null {
  if (end - start > SHORT_ASCII_MAX) return null;
  let s = "";
  for (let i = start; i < end; i++) {
    const b = bytes[i];
    if (b >= 0x80) return null;
    s += String.fromCharCode(b);
  }
  return s;
}

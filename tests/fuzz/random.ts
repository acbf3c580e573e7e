/**
 * Seeded randomness and protocol-agnostic byte mutations shared by the fuzzers: everything a
 * fuzz input is made of comes from one {@link rng} seeded from (seed, target, batch), so a
 * finding is reproduced by its seed and batch alone.
 *
 * @module
 */
import { concatBytes } from "../../src/base/bytes.ts";

/** A source of numbers in [0, 1). */
export type Rand = () => number;

/** mulberry32: small, fast, seedable. */
export function rng(seed: number): Rand {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The generator of batch `batch` of `target` under `seed`. */
export function batchRng(seed: number, target: number, batch: number): Rand {
  return rng((seed * 0x9e3779b1 + target * 0xc2b2ae35 + batch * 0x85ebca6b) >>> 0);
}

/** An integer in [0, n). */
export const int = (r: Rand, n: number): number => Math.floor(r() * n);
/** One element of `xs`. */
export const pick = <T>(r: Rand, xs: readonly T[]): T => xs[int(r, xs.length)];

/** Bytes that break parsers: zero, one, sign bits, all ones, UTF-8 lead and continuation bytes. */
export const INTERESTING = [0x00, 0x01, 0x7f, 0x80, 0xff, 0xfe, 0xc0, 0xed, 0xf4, 0x23, 0x2b, 0x2f];

/** Little-endian u32 values that break length fields (the last ones: "4 GB"). */
const INTERESTING_U32 = [0, 1, 2, 255, 256, 0x7fff_ffff, 0x8000_0000, 0xffff_fffe, 0xffff_ffff];

/** `n` random bytes, half of them interesting. */
export function randomBytes(r: Rand, n: number): Uint8Array {
  return new Uint8Array(n).map(() => int(r, 2) ? int(r, 256) : pick(r, INTERESTING));
}

/** Overwrites a little-endian u32 at a random offset with a length-breaking value or ±1. */
function tweakU32(r: Rand, b: Uint8Array): Uint8Array {
  if (b.length < 4) return b;
  const out = b.slice();
  const v = new DataView(out.buffer);
  // Fields of the Iggy wire sit at 4-byte boundaries more often than not.
  const at = int(r, 2) ? int(r, out.length >> 2) * 4 : int(r, out.length - 3);
  const old = v.getUint32(at, true);
  const value = int(r, 3) === 0 ? (old + (int(r, 2) ? 1 : -1)) >>> 0 : pick(r, INTERESTING_U32);
  v.setUint32(at, value, true);
  return out;
}

/** Sets a u64 somewhere to 2^53, 2^63 or 2^64 − 1 (offsets, timestamps, lengths). */
function tweakU64(r: Rand, b: Uint8Array): Uint8Array {
  if (b.length < 8) return b;
  const out = b.slice();
  const at = int(r, out.length - 7);
  const value = pick(r, [2n ** 53n, 2n ** 63n, 2n ** 64n - 1n, 0n]);
  new DataView(out.buffer).setBigUint64(at, value, true);
  return out;
}

/** One random mutation of `b`; `other` is splice material. */
export function mutateOnce(r: Rand, b: Uint8Array, other: Uint8Array): Uint8Array {
  switch (int(r, 11)) {
    case 0: { // bit flips
      const out = b.slice();
      for (let k = 1 + int(r, 3); k > 0 && out.length > 0; k--) {
        out[int(r, out.length)] ^= 1 << int(r, 8);
      }
      return out;
    }
    case 1: { // interesting byte
      const out = b.slice();
      if (out.length > 0) out[int(r, out.length)] = pick(r, INTERESTING);
      return out;
    }
    case 2: { // insert bytes
      const at = int(r, b.length + 1);
      return concatBytes([b.subarray(0, at), randomBytes(r, 1 + int(r, 8)), b.subarray(at)]);
    }
    case 3: { // delete a range
      if (b.length === 0) return b;
      const at = int(r, b.length);
      const n = 1 + int(r, Math.min(16, b.length - at));
      return concatBytes([b.subarray(0, at), b.subarray(at + n)]);
    }
    case 4:
    case 5:
      return tweakU32(r, b);
    case 6:
      return tweakU64(r, b);
    case 7: // truncate
      return b.subarray(0, int(r, b.length + 1));
    case 8: // splice: head of one, tail of another
      return concatBytes([
        b.subarray(0, int(r, b.length + 1)),
        other.subarray(int(r, other.length + 1)),
      ]);
    case 9: { // duplicate a range in place
      if (b.length === 0) return b;
      const at = int(r, b.length);
      const n = 1 + int(r, Math.min(32, b.length - at));
      return concatBytes([b.subarray(0, at + n), b.subarray(at, at + n), b.subarray(at + n)]);
    }
    default: { // a run of one byte (zeros or 0xff) over a field
      const out = b.slice();
      if (out.length === 0) return out;
      const at = int(r, out.length);
      out.fill(pick(r, [0, 0xff]), at, Math.min(out.length, at + 1 + int(r, 12)));
      return out;
    }
  }
}

/** One to three mutations of `b`, splicing from `corpus`. */
export function mutate(r: Rand, b: Uint8Array, corpus: readonly Uint8Array[]): Uint8Array {
  let out = b;
  for (let k = 1 + int(r, 3); k > 0; k--) out = mutateOnce(r, out, pick(r, corpus));
  return out;
}

/** Hex of the first 512 bytes (findings show the input they came from). */
export function hex(b: Uint8Array): string {
  return [...b.subarray(0, 512)].map((x) => x.toString(16).padStart(2, "0")).join("");
}

/** The text of an error for a finding: its class and message, first line. */
export function describe(e: unknown): string {
  if (!(e instanceof Error)) return `non-Error thrown: ${String(e)}`;
  const where = e.stack?.split("\n").find((l) => l.includes("/src/"))?.trim() ?? "";
  return `${e.name}: ${e.message.split("\n")[0].slice(0, 200)} ${where}`;
}

/**
 * Salted, slow password hashes for embedded-mode users: PBKDF2-HMAC-SHA256 through WebCrypto.
 * Format: `pbkdf2-sha256$<iterations>$<salt base64>$<hash base64>`.
 *
 * @module
 */

import { utf8 } from "../base/utf8.ts";

const PREFIX = "pbkdf2-sha256";
/** OWASP's 2023 figure for PBKDF2-HMAC-SHA256. */
export const DEFAULT_ITERATIONS = 210_000;
const HASH_BYTES = 32;
const FORMAT = /^pbkdf2-sha256\$(\d{1,9})\$([A-Za-z0-9+/]+={0,2})\$([A-Za-z0-9+/]+={0,2})$/;

/** True when `s` has the shape of a hash made by {@link hashPassword}. */
export function isValidPasswordHash(s: string): boolean {
  const m = FORMAT.exec(s);
  return m !== null && Number(m[1]) >= 1000;
}

/** Hashes a password with a fresh random salt. */
export async function hashPassword(
  password: string,
  iterations = DEFAULT_ITERATIONS,
): Promise<string> {
  const salt = crypto.getRandomValues(new Uint8Array(16));
  const hash = await derive(password, salt, iterations);
  return `${PREFIX}$${iterations}$${toB64(salt)}$${toB64(hash)}`;
}

/** Verifies a password against a stored hash in constant time (for equal-length hashes). */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const m = FORMAT.exec(stored);
  if (!m) return false;
  const expected = fromB64(m[3]);
  const actual = await derive(password, fromB64(m[2]), Number(m[1]), expected.length);
  return constantTimeEqual(actual, expected);
}

/** Compares two byte arrays without an early exit. */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  let diff = a.length ^ b.length;
  const n = Math.max(a.length, b.length);
  for (let i = 0; i < n; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}

async function derive(
  password: string,
  salt: Uint8Array,
  iterations: number,
  bytes = HASH_BYTES,
): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey(
    "raw",
    utf8(password),
    "PBKDF2",
    false,
    ["deriveBits"],
  );
  const bits = await crypto.subtle.deriveBits(
    { name: "PBKDF2", hash: "SHA-256", salt: salt as BufferSource, iterations },
    key,
    bytes * 8,
  );
  return new Uint8Array(bits);
}

function toB64(b: Uint8Array): string {
  let s = "";
  for (const x of b) s += String.fromCharCode(x);
  return btoa(s);
}

function fromB64(s: string): Uint8Array {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

/**
 * The 0.12 Register body: the version prefix, then a 32-byte bind secret
 * kept for the logical session and never logged, then the credentials as in 0.11.
 *
 * @module
 */

import { ByteWriter } from "../bytes.ts";
import { writeName } from "../encoding.ts";
import { type Credentials, encodeRegisterAs } from "../login.ts";
import { CLIENT_NAME, CLIENT_VERSION } from "../version.ts";
import { xxh3_64 } from "../../../base/xxhash.ts";

/** Length of the bind secret. */
export const BIND_SECRET_BYTES = 32;

/** A fresh random bind secret. */
export function newBindSecret(): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(BIND_SECRET_BYTES));
}

/** Code and body of a 0.12 Register for `credentials`, registering as `packedVersion`. */
export function encodeRegister012(
  credentials: Credentials,
  bindSecret: Uint8Array,
  packedVersion: number,
): { code: number; body: Uint8Array } {
  if (bindSecret.length !== BIND_SECRET_BYTES) throw new RangeError("Bind secret is not 32 bytes");
  return encodeRegisterAs(packedVersion, credentials, bindSecret);
}

/**
 * Register's `request_checksum`: XXH3-64 of the body, widened. A 0.12 server wants it random,
 * non-zero and kept on retries; a 0.11 server checks a non-zero stamp against exactly this
 * hash before its version gate. With it one probe Register reaches the gate of both, and the
 * random bind secret in the body makes it unique per session.
 */
export function registerChecksum(body: Uint8Array): bigint {
  const sum = xxh3_64(body);
  return sum === 0n ? 1n : sum; // 0 would mean "unstamped"
}

/**
 * BindSession (15) body: the version prefix, `[client_id:u128][session:u64]
 * [metadata_watermark:u64]`, then the session's bind secret. The watermark is 0: this client
 * keeps no metadata position (what a server does with 0 is not known here).
 */
export function bindSessionBody(
  packedVersion: number,
  client: bigint,
  session: bigint,
  bindSecret: Uint8Array,
): Uint8Array {
  const w = new ByteWriter(96);
  w.u32(packedVersion);
  writeName(w, CLIENT_NAME);
  writeName(w, CLIENT_VERSION);
  w.u64(client & 0xffff_ffff_ffff_ffffn).u64(client >> 64n);
  w.u64(session).u64(0);
  return w.bytes(bindSecret).finish();
}

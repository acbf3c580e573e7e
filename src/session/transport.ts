/**
 * What a connection needs of its byte transport. `Deno.Conn` and `Deno.TlsConn` satisfy it,
 * and tests use in-memory pairs, so the session logic never touches `Deno.*`.
 *
 * @module
 */

/** A bidirectional byte stream. */
export interface Transport {
  /** Source IP of the peer, for anonymous rules and logs. */
  readonly remoteAddress: string;
  /** Reads into `buf`; resolves with the byte count, or null at end of stream. */
  read(buf: Uint8Array): Promise<number | null>;
  /** Writes some prefix of `bytes`; resolves with how many were written. */
  write(bytes: Uint8Array): Promise<number>;
  /** Closes both directions. Must not throw when already closed. */
  close(): void;
}

/** Writes all of `bytes`, looping over partial writes. */
export async function writeAll(t: Transport, bytes: Uint8Array): Promise<void> {
  let off = 0;
  while (off < bytes.length) off += await t.write(off === 0 ? bytes : bytes.subarray(off));
}

/**
 * The Register handshake: login with username + password (code 40) or with a
 * personal access token (code 45), both prefixed by the client version info, and the reply
 * that binds the session.
 *
 * @module
 */

import { ByteReader, ByteWriter, toUtf8 } from "./bytes.ts";
import { Code } from "./codes.ts";
import { EncodeError, readName, writeName } from "./encoding.ts";
import { CLIENT_NAME, CLIENT_VERSION, PROTOCOL_VERSION_PACKED } from "./version.ts";

/** How a connection logs in. */
export type Credentials =
  | { readonly kind: "password"; readonly username: string; readonly password: string }
  | { readonly kind: "token"; readonly token: string };

/** The Register reply. */
export interface RegisterReply {
  readonly userId: number;
  readonly session: bigint;
  readonly serverProtocolVersion: number;
  readonly serverVersion: string;
}

/** `[len:u8][UTF-8]`, at most 255 bytes (passwords and tokens). */
export function writeShortBytes(w: ByteWriter, value: string, what: string): void {
  const b = toUtf8(value);
  if (b.length > 255) throw new EncodeError(`${what} must be at most 255 bytes`);
  w.u8(b.length).bytes(b);
}

/** Command code and body of the 0.11 Register request for `credentials`. */
export function encodeRegister(credentials: Credentials): { code: number; body: Uint8Array } {
  return encodeRegisterAs(PROTOCOL_VERSION_PACKED, credentials);
}

/**
 * A Register request of either dialect: `[version:u32][client name][client version]`, then
 * `between` (0.12: the bind secret), then the credentials and an empty context.
 */
export function encodeRegisterAs(
  packedVersion: number,
  credentials: Credentials,
  between?: Uint8Array,
): { code: number; body: Uint8Array } {
  const w = new ByteWriter(160);
  w.u32(packedVersion);
  writeName(w, CLIENT_NAME);
  writeName(w, CLIENT_VERSION);
  if (between !== undefined) w.bytes(between);
  if (credentials.kind === "password") {
    writeName(w, credentials.username, "Username");
    writeShortBytes(w, credentials.password, "Password");
    w.u32(0); // no context
    return { code: Code.LOGIN_REGISTER, body: w.finish() };
  }
  writeShortBytes(w, credentials.token, "Personal access token");
  w.u32(0);
  return { code: Code.LOGIN_REGISTER_WITH_PAT, body: w.finish() };
}

/** Decodes `[user_id:u32][session:u64][server_protocol_version:u32][server_version:Name]`. */
export function decodeRegisterReply(body: Uint8Array): RegisterReply {
  const r = new ByteReader(body);
  return {
    userId: r.u32("user_id"),
    session: r.u64("session"),
    serverProtocolVersion: r.u32("server_protocol_version"),
    serverVersion: readName(r, "server_version"),
  };
}

/**
 * Iggy binary protocol versions: how they are packed on the wire and printed, and the 0.11
 * dialect's own version (0.12.2 is `v12/wire.ts` `PROTOCOL_012`). The 0.11 Register body
 * carries it and an `IncompatibleProtocol` eviction is reported against it.
 *
 * @module
 */

/** Protocol version as major/minor/patch. */
export interface ProtocolVersion {
  /** Major version (10 bits on the wire). */
  readonly major: number;
  /** Minor version (10 bits). */
  readonly minor: number;
  /** Patch version (10 bits). */
  readonly patch: number;
}

/** The 0.11 dialect's protocol: Iggy binary protocol 0.11.0 (Iggy server 0.9, VSR framing). */
export const PROTOCOL_VERSION: ProtocolVersion = Object.freeze({ major: 0, minor: 11, patch: 0 });

/** Packs a version the way the wire carries it: `major << 20 | minor << 10 | patch`. */
export function packVersion(v: ProtocolVersion): number {
  return ((v.major << 20) | (v.minor << 10) | v.patch) >>> 0;
}

/** Unpacks a wire version (inverse of {@link packVersion}). */
export function unpackVersion(packed: number): ProtocolVersion {
  return { major: packed >>> 20, minor: (packed >>> 10) & 0x3ff, patch: packed & 0x3ff };
}

/** "0.11.0" for a packed or unpacked version. */
export function formatVersion(v: ProtocolVersion | number): string {
  const u = typeof v === "number" ? unpackVersion(v) : v;
  return `${u.major}.${u.minor}.${u.patch}`;
}

/** Packed protocol version sent in every Register (0.11.0 = 0x2C00). */
export const PROTOCOL_VERSION_PACKED: number = packVersion(PROTOCOL_VERSION);

/** Client name and version sent in the Register body (informational for the server). */
export const CLIENT_NAME = "iggy-mqtt-gateway";
/** See {@link CLIENT_NAME}. */
export const CLIENT_VERSION = "0.1.0";

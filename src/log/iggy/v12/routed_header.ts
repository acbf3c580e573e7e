/**
 * The 0.12 request header: the 0.11 fields (`../header_layout.ts`) plus `request_checksum` (a random
 * non-zero id on Register, Logout and metadata ops) and the partition context stamped into
 * every partition request. Reply headers add the committed mark.
 *
 * @module
 */

import { HEADER_SIZE, type RequestFields, writeRequestHeader } from "../header_layout.ts";
import { ReplyOffset012, RequestOffset012 } from "./wire.ts";

/** Incarnation and metadata op of a partition route; owner 0 for plain consumers. */
export interface RouteContext {
  readonly incarnation: bigint;
  readonly ownerGeneration: bigint;
  readonly metadataOp: bigint;
}

/** What a 0.12 request header carries beyond the 0.11 fields. */
export interface RequestFields012 extends RequestFields {
  /** 0 for partition ops and reads. */
  readonly requestChecksum?: bigint;
  /** Stamped for routed (partition) requests. */
  readonly context?: RouteContext;
}

const U64 = 0xffff_ffff_ffff_ffffn;

/** Writes a 0.12 request header into a fresh 256-byte array. */
export function writeRequestHeader012(f: RequestFields012): Uint8Array {
  const header = writeRequestHeader(f);
  const v = new DataView(header.buffer);
  const sum = f.requestChecksum ?? 0n;
  v.setBigUint64(RequestOffset012.REQUEST_CHECKSUM, sum & U64, true);
  v.setBigUint64(RequestOffset012.REQUEST_CHECKSUM + 8, (sum >> 64n) & U64, true);
  if (f.context) stampContext(header, f.context);
  return header;
}

/** Writes (or rewrites, after a re-route) the partition context of a request header. */
export function stampContext(header: Uint8Array, c: RouteContext): void {
  const v = new DataView(header.buffer, header.byteOffset, HEADER_SIZE);
  v.setBigUint64(RequestOffset012.PARTITION_INCARNATION, c.incarnation, true);
  v.setBigUint64(RequestOffset012.OWNER_GENERATION, c.ownerGeneration, true);
  v.setBigUint64(RequestOffset012.MINIMUM_METADATA_OP, c.metadataOp, true);
}

/** A random non-zero u128 (the metadata-op `request_checksum`). */
export function randomRequestChecksum(): bigint {
  const b = new BigUint64Array(2);
  for (;;) {
    crypto.getRandomValues(b);
    const id = b[0] | (b[1] << 64n);
    if (id !== 0n) return id;
  }
}

/** True when a reply header marks a final committed result (byte 220 = 1). */
export function isCommittedReply(header: Uint8Array): boolean {
  return header[ReplyOffset012.COMMITTED] === 1;
}

/** Header fields of one 0.12 request besides its code and body. */
export interface Stamp012 {
  readonly client: bigint;
  readonly request: bigint;
  readonly session: bigint;
  readonly operation: number;
  readonly requestChecksum?: bigint;
  readonly context?: RouteContext;
}

/**
 * The whole frame of a 0.12 request. With `framed`, `body` already has HEADER_SIZE bytes of
 * room in front (a SEND_MESSAGES frame) and the header is written there in place.
 */
export function requestFrame012(
  code: number,
  body: Uint8Array,
  s: Stamp012,
  framed = false,
): Uint8Array {
  const bodyLength = framed ? body.length - HEADER_SIZE : body.length;
  const header = writeRequestHeader012({
    bodyLength,
    client: s.client,
    request: s.request,
    operation: s.operation,
    session: s.session,
    code: s.operation === 2 ? code : undefined,
    requestChecksum: s.requestChecksum,
    context: s.context,
  });
  let frame = body;
  if (!framed) {
    frame = new Uint8Array(HEADER_SIZE + body.length);
    frame.set(body, HEADER_SIZE);
  }
  frame.set(header);
  return frame;
}

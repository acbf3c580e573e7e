/**
 * The 256-byte consensus header that starts every frame: the request header
 * the client writes and the reply / eviction headers it reads.
 *
 * @module
 */

import { FrameKind, type IggyEvictionError } from "./codes.ts";

/** Size of every frame header, both directions. */
export const HEADER_SIZE = 256;

/** Byte offsets of the request-header fields the client writes (all others stay zero). */
export const RequestOffset = Object.freeze({
  SIZE: 48,
  COMMAND: 60,
  CLIENT: 128,
  REQUEST: 168,
  OPERATION: 176,
  SESSION: 184,
  CODE: 196,
});

/** Byte offsets of reply-header fields. */
export const ReplyOffset = Object.freeze({
  SIZE: 48,
  COMMAND: 60,
  REQUEST: 200,
  OPERATION: 208,
  STATUS: 216,
});

/** Byte offsets of eviction-header fields. */
export const EvictionOffset = Object.freeze({
  CLIENT: 128,
  SERVER_VERSION: 144,
  SERVER_VERSION_MIN: 148,
  REASON: 255,
});

/** What the client puts into a request header. */
export interface RequestFields {
  /** Body length in bytes (the header adds 256). */
  readonly bodyLength: number;
  /** Client id, non-zero u128, minted per Register. */
  readonly client: bigint;
  /** Request id. */
  readonly request: bigint;
  /** Operation byte. */
  readonly operation: number;
  /** Bound session, 0 for Register. */
  readonly session: bigint;
  /** Command code, written at 196..200 for NonReplicated operations only. */
  readonly code?: number;
}

const U64 = 0xffff_ffff_ffff_ffffn;

/**
 * Writes a request header into a fresh 256-byte array, or into the first 256 bytes of `into`
 * (a frame whose header room is still zero, or holds a header of the same command: every
 * field this writes is written again).
 */
export function writeRequestHeader(f: RequestFields, into?: Uint8Array): Uint8Array {
  const header = into ?? new Uint8Array(HEADER_SIZE);
  const v = new DataView(header.buffer, header.byteOffset, HEADER_SIZE);
  v.setUint32(RequestOffset.SIZE, HEADER_SIZE + f.bodyLength, true);
  v.setUint8(RequestOffset.COMMAND, FrameKind.REQUEST);
  v.setBigUint64(RequestOffset.CLIENT, f.client & U64, true);
  v.setBigUint64(RequestOffset.CLIENT + 8, (f.client >> 64n) & U64, true);
  v.setBigUint64(RequestOffset.REQUEST, f.request, true);
  v.setUint8(RequestOffset.OPERATION, f.operation);
  v.setBigUint64(RequestOffset.SESSION, f.session, true);
  if (f.code !== undefined) v.setUint32(RequestOffset.CODE, f.code, true);
  return header;
}

function view(header: Uint8Array): DataView {
  return new DataView(header.buffer, header.byteOffset, HEADER_SIZE);
}

/** Total frame size (header included) from any header. */
export function readFrameSize(header: Uint8Array): number {
  return view(header).getUint32(ReplyOffset.SIZE, true);
}

/** Frame kind (5 request, 8 reply, 13 eviction) from any header. */
export function readFrameKind(header: Uint8Array): number {
  return header[ReplyOffset.COMMAND];
}

/** Fields of a reply header. */
export interface ReplyHeader {
  readonly size: number;
  readonly request: bigint;
  readonly operation: number;
  /** 0 = committed; otherwise an IggyError code with an empty body. */
  readonly status: number;
}

/** Reads a reply header. */
export function readReplyHeader(header: Uint8Array): ReplyHeader {
  const v = view(header);
  return {
    size: v.getUint32(ReplyOffset.SIZE, true),
    request: v.getBigUint64(ReplyOffset.REQUEST, true),
    operation: v.getUint8(ReplyOffset.OPERATION),
    status: v.getUint32(ReplyOffset.STATUS, true),
  };
}

/** Fields of an eviction header: what an {@link IggyEvictionError} reports. */
export type EvictionHeader = Pick<
  IggyEvictionError,
  "reason" | "serverVersion" | "serverVersionMin"
>;

/** Reads an eviction header. */
export function readEvictionHeader(header: Uint8Array): EvictionHeader {
  const v = view(header);
  return {
    reason: v.getUint8(EvictionOffset.REASON),
    serverVersion: v.getUint32(EvictionOffset.SERVER_VERSION, true),
    serverVersionMin: v.getUint32(EvictionOffset.SERVER_VERSION_MIN, true),
  };
}

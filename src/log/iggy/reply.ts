/**
 * Turns one received frame into a reply body or a typed error, in the order Iggy's binary
 * protocol 0.11 (Iggy server 0.9) checks them:
 * eviction first, then the reply status (pre-commit denial, empty body), then the result
 * section of result-framed operations; other bodies are the raw payload.
 *
 * @module
 */

import { DecodeError } from "./bytes.ts";
import { FrameKind, IggyError, IggyEvictionError, isResultFramed } from "./codes.ts";
import {
  HEADER_SIZE,
  readEvictionHeader,
  readFrameKind,
  readReplyHeader,
} from "./header_layout.ts";

/** Text for the commands in error messages. */
const COMMAND_NAMES: Record<number, string> = {
  1: "ping",
  31: "get user",
  33: "create user",
  34: "delete user",
  42: "create personal access token",
  43: "delete personal access token",
  40: "login",
  45: "login with token",
  100: "poll messages",
  101: "send messages",
  120: "get consumer offset",
  121: "store consumer offset",
  200: "get stream",
  201: "get streams",
  202: "create stream",
  203: "delete stream",
  300: "get topic",
  302: "create topic",
  600: "get consumer group",
  602: "create consumer group",
  604: "join consumer group",
  605: "leave consumer group",
  606: "sync consumer group",
};

/** Human name of a command code. */
export function commandName(code: number): string {
  return COMMAND_NAMES[code] ?? `command ${code}`;
}

/**
 * Decodes a complete frame (`header` 256 bytes, `body` the rest) answering command `code`.
 * Returns the payload; throws {@link IggyEvictionError}, {@link IggyError} or
 * {@link DecodeError}.
 */
export function decodeReply(header: Uint8Array, body: Uint8Array, code: number): Uint8Array {
  if (header.length !== HEADER_SIZE) throw new DecodeError("Iggy frame header is not 256 bytes");
  const kind = readFrameKind(header);
  if (kind === FrameKind.EVICTION) {
    const e = readEvictionHeader(header);
    throw new IggyEvictionError(e.reason, e.serverVersion, e.serverVersionMin);
  }
  if (kind !== FrameKind.REPLY) throw new DecodeError(`Unexpected Iggy frame kind ${kind}`);
  const reply = readReplyHeader(header);
  if (reply.status !== 0) {
    throw new IggyError(reply.status, `Iggy refused ${commandName(code)}: error ${reply.status}`);
  }
  if (!isResultFramed(reply.operation, body.length)) return body;
  return splitResult(body, code);
}

/** Strips `[count:u32]{index:u32,result:u32}*`; a non-zero first result is the error. */
export function splitResult(body: Uint8Array, code: number): Uint8Array {
  if (body.length < 4) throw new DecodeError("Iggy result section is truncated");
  const v = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const count = v.getUint32(0, true);
  const end = 4 + count * 8;
  if (body.length < end) throw new DecodeError("Iggy result section is truncated");
  if (count > 0) {
    const result = v.getUint32(8, true);
    if (result !== 0) {
      throw new IggyError(result, `Iggy refused ${commandName(code)}: error ${result}`);
    }
  }
  return body.subarray(end);
}

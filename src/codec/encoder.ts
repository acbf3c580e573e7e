/**
 * Encoding of server-to-client packets, each written into one allocation.
 *
 * mqtt-packet is not used at run time: it pulls in `debug`, which enumerates every
 * environment variable at import, and the gateway's permission set grants only its own
 * prefix. mqtt-packet stays the oracle these encoders are tested against.
 *
 * @module
 */
import { utf8 } from "../base/utf8.ts";

/** CONNACK return codes of MQTT 3.1.1 [MQTT-3.2.2.3]. */
export const ConnackCode = {
  ACCEPTED: 0,
  UNACCEPTABLE_PROTOCOL_VERSION: 1,
  IDENTIFIER_REJECTED: 2,
  SERVER_UNAVAILABLE: 3,
  BAD_USERNAME_OR_PASSWORD: 4,
  NOT_AUTHORIZED: 5,
} as const;

/** SUBACK return code for a refused filter [MQTT-3.9.3]. */
export const SUBACK_FAILURE = 0x80;

const PINGRESP = new Uint8Array([0xd0, 0x00]);

/** CONNACK with session-present and return code. */
export function encodeConnack(sessionPresent: boolean, returnCode: number): Uint8Array {
  return new Uint8Array([0x20, 0x02, sessionPresent ? 1 : 0, returnCode]);
}

/** SUBACK with one return code per filter (0, 1 or 0x80). */
export function encodeSuback(packetId: number, granted: readonly number[]): Uint8Array {
  const remaining = 2 + granted.length;
  const header = remainingLength(remaining);
  const out = new Uint8Array(1 + header.length + remaining);
  out[0] = 0x90;
  out.set(header, 1);
  let pos = 1 + header.length;
  out[pos++] = packetId >> 8;
  out[pos++] = packetId & 0xff;
  out.set(granted, pos);
  return out;
}

/** Variable-length encoding of a remaining length [MQTT-2.2.3]. */
export function remainingLength(n: number): number[] {
  const out: number[] = [];
  do {
    let digit = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) digit |= 0x80;
    out.push(digit);
  } while (n > 0);
  return out;
}

/** UNSUBACK. */
export function encodeUnsuback(packetId: number): Uint8Array {
  return new Uint8Array([0xb0, 0x02, packetId >> 8, packetId & 0xff]);
}

/** PINGRESP (shared constant; never mutated). */
export function encodePingresp(): Uint8Array {
  return PINGRESP;
}

/** Writes a PUBACK for `packetId` into `out` at `at`; returns the next position. */
export function writePuback(out: Uint8Array, at: number, packetId: number): number {
  out[at] = 0x40;
  out[at + 1] = 0x02;
  out[at + 2] = packetId >> 8;
  out[at + 3] = packetId & 0xff;
  return at + 4;
}

/**
 * First bytes of the 4-byte acknowledgements [MQTT-3.4.1, 3.5.1, 3.6.1, 3.7.1]; the outbox
 * writes them (`Outbox.pushAck`).
 */
export const AckType = { PUBACK: 0x40, PUBREC: 0x50, PUBREL: 0x62, PUBCOMP: 0x70 } as const;

/** PUBACK as its own 4 bytes. */
export function encodePuback(packetId: number): Uint8Array {
  const b = new Uint8Array(4);
  writePuback(b, 0, packetId);
  return b;
}

/**
 * Outbound PUBLISH. `topicBytes` may be cached by the caller (it is per topic, not per copy).
 * `props`: the MQTT 5 property block without its length prefix; null for 3.1.1 (no field).
 */
export function encodePublish(
  topicBytes: Uint8Array,
  payload: Uint8Array,
  qos: 0 | 1 | 2,
  packetId: number,
  dup: boolean,
  retain = false,
  props: Uint8Array | null = null,
): Uint8Array {
  const propsField = props === null ? 0 : varintBytes(props.length) + props.length;
  const remaining = 2 + topicBytes.length + (qos > 0 ? 2 : 0) + propsField + payload.length;
  const out = new Uint8Array(1 + varintBytes(remaining) + remaining);
  out[0] = 0x30 | (dup ? 0x08 : 0) | (qos << 1) | (retain ? 1 : 0);
  let pos = 1;
  for (const digit of remainingLength(remaining)) out[pos++] = digit;
  out[pos++] = topicBytes.length >> 8;
  out[pos++] = topicBytes.length & 0xff;
  out.set(topicBytes, pos);
  pos += topicBytes.length;
  if (qos > 0) {
    out[pos++] = packetId >> 8;
    out[pos++] = packetId & 0xff;
  }
  if (props !== null) {
    for (const digit of remainingLength(props.length)) out[pos++] = digit;
    out.set(props, pos);
    pos += props.length;
  }
  out.set(payload, pos);
  return out;
}

/** Bytes of a PUBLISH as {@link encodePublish} would make it (maximum packet size checks). */
export function publishSize(
  topicBytes: number,
  payload: number,
  qos: 0 | 1 | 2,
  props: Uint8Array | null,
): number {
  const propsField = props === null ? 0 : varintBytes(props.length) + props.length;
  const remaining = 2 + topicBytes + (qos > 0 ? 2 : 0) + propsField + payload;
  return 1 + varintBytes(remaining) + remaining;
}

/** Size of a variable byte integer [MQTT-1.5.5]. */
function varintBytes(n: number): number {
  return n < 128 ? 1 : n < 16384 ? 2 : n < 2097152 ? 3 : 4;
}

export { utf8 };

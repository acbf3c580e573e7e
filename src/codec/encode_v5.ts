/**
 * MQTT 5 server-to-client packets: CONNACK, PUBACK, SUBACK, UNSUBACK and DISCONNECT with
 * reason codes and properties, and the property block of an outbound PUBLISH. Only MQTT 5
 * connections come here; the 3.1.1 encoders in `encoder.ts` are untouched.
 *
 * @module
 */
import { utf8 } from "../base/utf8.ts";
import { remainingLength } from "./encoder.ts";
import type { MessageProperties, UserProperties } from "./packets.ts";
import { Prop } from "./properties.ts";

/** Builds a property block (without its length prefix) in a growing buffer. */
export class PropertyWriter {
  #buf = new Uint8Array(64);
  #at = 0;

  get length(): number {
    return this.#at;
  }

  #room(n: number): void {
    if (this.#at + n <= this.#buf.length) return;
    const grown = new Uint8Array(Math.max(this.#buf.length * 2, this.#at + n));
    grown.set(this.#buf.subarray(0, this.#at));
    this.#buf = grown;
  }
  #push(...bytes: number[]): void {
    this.#room(bytes.length);
    for (const b of bytes) this.#buf[this.#at++] = b;
  }
  #lengthPrefixed(b: Uint8Array): void {
    this.#push(b.length >> 8, b.length & 0xff);
    this.#room(b.length);
    this.#buf.set(b, this.#at);
    this.#at += b.length;
  }

  byte(id: number, v: number): this {
    this.#push(id, v & 0xff);
    return this;
  }
  u16(id: number, v: number): this {
    this.#push(id, (v >> 8) & 0xff, v & 0xff);
    return this;
  }
  u32(id: number, v: number): this {
    this.#push(id, (v >>> 24) & 0xff, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff);
    return this;
  }
  varint(id: number, v: number): this {
    this.#push(id, ...remainingLength(v));
    return this;
  }
  string(id: number, s: string): this {
    return this.binary(id, utf8(s));
  }
  binary(id: number, b: Uint8Array): this {
    this.#push(id);
    this.#lengthPrefixed(b);
    return this;
  }
  /** User properties, in order, repeated names kept. */
  pairs(ps: UserProperties | undefined): this {
    if (ps === undefined) return this;
    for (const [k, v] of ps) {
      this.#push(Prop.USER_PROPERTY);
      this.#lengthPrefixed(utf8(k));
      this.#lengthPrefixed(utf8(v));
    }
    return this;
  }

  /** The block's bytes. */
  bytes(): Uint8Array {
    return this.#buf.slice(0, this.#at);
  }
}

/** A packet: first byte, then `body` parts as remaining length, in one allocation. */
function packet(byte1: number, parts: readonly (Uint8Array | readonly number[])[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const header = remainingLength(n);
  const out = new Uint8Array(1 + header.length + n);
  out[0] = byte1;
  out.set(header, 1);
  let at = 1 + header.length;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** A property block with its length prefix. */
function block(props: Uint8Array): Uint8Array | number[] {
  if (props.length === 0) return [0];
  const len = remainingLength(props.length);
  const out = new Uint8Array(len.length + props.length);
  out.set(len, 0);
  out.set(props, len.length);
  return out;
}

/** CONNACK [MQTT-3.2]: acknowledge flags, reason code, properties. */
export function encodeConnack5(
  sessionPresent: boolean,
  reasonCode: number,
  props: PropertyWriter,
): Uint8Array {
  return packet(0x20, [[sessionPresent ? 1 : 0, reasonCode], block(props.bytes())]);
}

/** CONNACK refusing a CONNECT with `reasonCode` and no properties (a malformed CONNECT). */
export function encodeRefusal5(reasonCode: number): Uint8Array {
  return encodeConnack5(false, reasonCode, new PropertyWriter());
}

/**
 * PUBACK [MQTT-3.4.2]. Reason 0 without properties is the short 4-byte form (as 3.1.1's).
 */
export function encodePuback5(
  packetId: number,
  reasonCode: number,
  reasonString?: string,
  userProperties?: UserProperties,
): Uint8Array {
  const id = [packetId >> 8, packetId & 0xff];
  if (reasonCode === 0 && reasonString === undefined && userProperties === undefined) {
    return packet(0x40, [id]);
  }
  const w = new PropertyWriter();
  if (reasonString !== undefined) w.string(Prop.REASON_STRING, reasonString);
  w.pairs(userProperties);
  return packet(0x40, [id, [reasonCode], block(w.bytes())]);
}

/**
 * PUBREL or PUBCOMP with a reason code and no properties (`type`: the first byte): 4 bytes for
 * 0 Success, else 5 (no property length when there are none [MQTT-3.6.2.1, 3.7.2.1]).
 */
export function encodeAck5(type: number, packetId: number, reasonCode: number): Uint8Array {
  if (reasonCode === 0) return new Uint8Array([type, 0x02, packetId >> 8, packetId & 0xff]);
  return new Uint8Array([type, 0x03, packetId >> 8, packetId & 0xff, reasonCode]);
}

/** SUBACK [MQTT-3.9]: one reason code per filter. */
export function encodeSuback5(
  packetId: number,
  codes: readonly number[],
  reasonString?: string,
): Uint8Array {
  const w = new PropertyWriter();
  if (reasonString !== undefined) w.string(Prop.REASON_STRING, reasonString);
  return packet(0x90, [[packetId >> 8, packetId & 0xff], block(w.bytes()), codes]);
}

/** UNSUBACK [MQTT-3.11]: one reason code per filter (0 success, 0x11 no subscription existed). */
export function encodeUnsuback5(packetId: number, codes: readonly number[]): Uint8Array {
  return packet(0xb0, [[packetId >> 8, packetId & 0xff], [0], codes]);
}

/**
 * DISCONNECT [MQTT-3.14] from the server, with a reason code, an optional reason string and an
 * optional Server Reference (with 0x9C Use another server). Over the client's maximum packet
 * size the reason string goes first, the reference last [MQTT-3.14.2-3].
 */
export function encodeDisconnect5(
  reasonCode: number,
  reasonString?: string,
  maxPacketSize = Infinity,
  serverReference?: string,
): Uint8Array {
  const withProps = (reason?: string) => {
    const w = new PropertyWriter();
    if (reason !== undefined) w.string(Prop.REASON_STRING, reason);
    if (serverReference !== undefined) w.string(Prop.SERVER_REFERENCE, serverReference);
    return packet(0xe0, [[reasonCode], block(w.bytes())]);
  };
  for (const p of [withProps(reasonString), withProps()]) if (p.length <= maxPacketSize) return p;
  return packet(0xe0, [[reasonCode], [0]]);
}

/**
 * The properties of an outbound PUBLISH that every copy shares (the message's own; the
 * expiry given is the time left). Subscription identifiers are per copy:
 * {@link withSubscriptionIds}.
 */
export function encodeMessageProperties(p: MessageProperties): Uint8Array {
  const w = new PropertyWriter();
  if (p.payloadFormat !== undefined) w.byte(Prop.PAYLOAD_FORMAT, p.payloadFormat);
  if (p.messageExpiry !== undefined) w.u32(Prop.MESSAGE_EXPIRY, p.messageExpiry);
  if (p.contentType !== undefined) w.string(Prop.CONTENT_TYPE, p.contentType);
  if (p.responseTopic !== undefined) w.string(Prop.RESPONSE_TOPIC, p.responseTopic);
  if (p.correlationData !== undefined) w.binary(Prop.CORRELATION_DATA, p.correlationData);
  w.pairs(p.userProperties);
  return w.bytes();
}

/** `shared` plus one Subscription Identifier property per id [MQTT-3.3.4-3]. */
export function withSubscriptionIds(shared: Uint8Array, ids: readonly number[]): Uint8Array {
  if (ids.length === 0) return shared;
  const tail: number[] = [];
  for (const id of ids) tail.push(Prop.SUBSCRIPTION_ID, ...remainingLength(id));
  const out = new Uint8Array(shared.length + tail.length);
  out.set(shared, 0);
  out.set(tail, shared.length);
  return out;
}

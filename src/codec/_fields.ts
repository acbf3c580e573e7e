/**
 * What the decoder's packet parsers share: the bounds, a bounds-checked cursor over a packet
 * body, and the topic name and filter rules.
 *
 * @module
 */
import { ProtocolError } from "./errors.ts";
import { decodeMqttString, isControlChar } from "./mqtt_string.ts";

/** Bounds the decoder enforces. */
export interface DecoderLimits {
  readonly maxPacketBytes: number;
  /** The first packet (CONNECT), read before anyone logged in; default `maxPacketBytes`. */
  readonly maxConnectPacketBytes?: number;
  readonly maxTopicBytes: number;
  readonly maxTopicLevels: number;
  /** MQTT 5: user properties one packet may carry; more → DISCONNECT 0x95. */
  readonly maxUserProperties?: number;
  /** MQTT 5: topic aliases the client may set (the CONNACK's Topic Alias Maximum). */
  readonly topicAliasMaximum?: number;
}

/** A cursor over one packet body. Every read is bounds-checked. */
export class Reader {
  constructor(readonly b: Uint8Array, public pos: number, readonly end: number) {}
  u8(): number {
    if (this.pos >= this.end) throw truncated();
    return this.b[this.pos++];
  }
  u16(): number {
    if (this.pos + 2 > this.end) throw truncated();
    const v = (this.b[this.pos] << 8) | this.b[this.pos + 1];
    this.pos += 2;
    return v;
  }
  u32(): number {
    if (this.pos + 4 > this.end) throw truncated();
    const b = this.b, p = this.pos;
    this.pos += 4;
    return ((b[p] << 24) >>> 0) + ((b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3]);
  }
  /** Variable byte integer [MQTT-1.5.5]: at most 4 bytes. */
  varint(): number {
    let v = 0;
    let mult = 1;
    for (let i = 0; i < 4; i++) {
      const d = this.u8();
      v += (d & 0x7f) * mult;
      if ((d & 0x80) === 0) return v;
      mult *= 128;
    }
    throw new ProtocolError("MQTT-1.5.5", "Variable byte integer longer than 4 bytes");
  }
  bytes(): Uint8Array {
    const n = this.u16();
    if (this.pos + n > this.end) throw truncated();
    const v = this.b.slice(this.pos, this.pos + n);
    this.pos += n;
    return v;
  }
  string(): string {
    const n = this.u16();
    if (this.pos + n > this.end) throw truncated();
    const s = decodeMqttString(this.b, this.pos, this.pos + n);
    this.pos += n;
    return s;
  }
  get left(): number {
    return this.end - this.pos;
  }
}

export function truncated(): ProtocolError {
  return new ProtocolError("MQTT-2.2.3", "Packet body shorter than its fields");
}

/**
 * MQTT strings SHOULD NOT carry control characters [MQTT-1.5.3], and a topic travels on into
 * Iggy headers and log lines, so topics and filters with them close the connection.
 */
function controlCharError(what: string): ProtocolError {
  return new ProtocolError("MQTT-1.5.3-control", `${what} contains a control character`);
}

/** Topic name rules for PUBLISH and wills: non-empty, no wildcards or controls, bounded levels. */
export function checkTopicName(topic: string, limits: DecoderLimits): void {
  if (topic.length === 0) throw new ProtocolError("MQTT-4.7.3-1", "Empty topic name");
  let levels = 1;
  for (let i = 0; i < topic.length; i++) {
    const c = topic.charCodeAt(i);
    if (c === 0x23 || c === 0x2b) {
      throw new ProtocolError("MQTT-3.3.2-2", `Wildcard in topic name "${topic}"`);
    }
    if (isControlChar(c)) throw controlCharError("Topic name");
    if (c === 0x2f && ++levels > limits.maxTopicLevels) {
      throw new ProtocolError(
        "MQTT-4.7.3-3",
        `Topic has more than max_topic_levels ${limits.maxTopicLevels} levels`,
      );
    }
  }
}

/**
 * The next SUBSCRIBE/UNSUBSCRIBE topic filter, checked for what every filter must be before
 * anything looks at it: non-empty [MQTT-4.7.3-1] and free of control characters. Wildcard
 * placement is the delivery's call.
 */
export function readTopicFilter(r: Reader): string {
  const filter = r.string();
  if (filter.length === 0) throw new ProtocolError("MQTT-4.7.3-1", "Empty topic filter");
  for (let i = 0; i < filter.length; i++) {
    if (isControlChar(filter.charCodeAt(i))) throw controlCharError("Topic filter");
  }
  return filter;
}

/** A packet identifier, which must not be 0 [MQTT-2.3.1-1]; `packet` names the packet. */
export function packetIdOf(r: Reader, packet: string): number {
  const id = r.u16();
  if (id === 0) throw new ProtocolError("MQTT-2.3.1-1", `${packet} with packet identifier 0`);
  return id;
}

/**
 * UNSUBSCRIBE's topic filters, to the end of the packet; at least one [MQTT-3.10.3-2].
 * `reasonCode`: the MQTT 5 DISCONNECT reason when there is none.
 */
export function unsubscribeFilters(r: Reader, reasonCode?: number): string[] {
  const filters: string[] = [];
  while (r.left > 0) filters.push(readTopicFilter(r));
  if (filters.length === 0) {
    throw new ProtocolError("MQTT-3.10.3-2", "UNSUBSCRIBE without topic filters", reasonCode);
  }
  return filters;
}

/** Throws when a SUBSCRIBE carried no filter [MQTT-3.8.3-3]; `reasonCode` as above. */
export function requireSubscriptions(count: number, reasonCode?: number): void {
  if (count === 0) {
    throw new ProtocolError("MQTT-3.8.3-3", "SUBSCRIBE without topic filters", reasonCode);
  }
}

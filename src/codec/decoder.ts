/**
 * Bounded MQTT 3.1.1 and MQTT 5 decoder (the CONNECT's protocol level decides which; the MQTT 5
 * bodies are in `decode_v5.ts`). Bytes go in as they arrive; whole packets come out.
 *
 * The bound comes first: the remaining length is checked against `maxPacketBytes` as soon as
 * the fixed header is complete, before any body byte is buffered [MQTT-2.2.3]. Only the bytes
 * that arrived are held (never a buffer of the announced size), so they stay below one maximal
 * packet, and every byte held is taken from the {@link PartialPacketBudget} shared by every
 * connection. Every violation throws {@link ProtocolError}; the caller closes that one
 * connection and calls {@link PacketDecoder.discard}.
 *
 * Why our own parser and not mqtt-packet's: mqtt-packet decodes strings leniently (invalid
 * UTF-8 becomes U+FFFD, U+0000 passes) and accepts packet id 0, and it buffers a packet before
 * we could refuse its size. mqtt-packet remains the encoder of control packets and the oracle
 * this decoder is tested against.
 *
 * @module
 */
import { concatBytes } from "../base/bytes.ts";
import { copyBytes } from "../base/byte_blocks.ts";
import {
  type DecoderLimits,
  packetIdOf,
  Reader,
  readTopicFilter,
  requireSubscriptions,
  truncated,
  unsubscribeFilters,
} from "./_fields.ts";
import { decodeConnect, type ProtocolLevels } from "./decode_connect.ts";
import {
  decodeDisconnect5,
  decodePuback5,
  decodeQosFlow5,
  decodeSubscription5,
  readPublishProperties,
  V5State,
} from "./decode_v5.ts";
import { ProtocolError } from "./errors.ts";
import {
  type ClientPacket,
  PacketType,
  type PublishPacket,
  type QosFlowPacket,
  type Subscription,
} from "./packets.ts";
import { type LastTopic, readTopic } from "./last_topic.ts";
import { readBoundedHeader, readFixedHeader } from "./fixed_header.ts";
import { type PartialPacketBudget, PartialPacketsFullError } from "./partial_packets.ts";
import { HeldPacket } from "./held_packet.ts";

export type { DecoderLimits } from "./_fields.ts";
export type { ProtocolLevels } from "./decode_connect.ts";

/** MQTT 5 AUTH packet type [MQTT-3.15]. */
const AUTH = 15;

/** Incremental decoder for one connection. */
export class PacketDecoder {
  #limits: DecoderLimits;
  #budget: PartialPacketBudget | null;
  /** The unfinished packet's bytes so far, taken from the budget. */
  readonly #held = new HeldPacket();
  /** The held packet's whole size once its fixed header is in; 0 before. */
  #total = 0;
  #connected = false;
  /** The previous PUBLISH's topic (clients mostly repeat theirs): reused when bytes match. */
  #lastTopic: LastTopic | null = null;
  #levels: ProtocolLevels | undefined;
  /** Set by an MQTT 5 CONNECT; null on a 3.1.1 connection. */
  #v5: V5State | null = null;

  constructor(limits: DecoderLimits, levels?: ProtocolLevels, budget?: PartialPacketBudget) {
    this.#limits = limits;
    this.#levels = levels;
    this.#budget = budget ?? null;
  }

  /** The connection speaks MQTT 5 (its CONNECT had protocol level 5). */
  get v5(): boolean {
    return this.#v5 !== null;
  }

  /** Bytes held waiting for the rest of a packet. */
  get bufferedBytes(): number {
    return this.#held.length;
  }

  /** Drops the held bytes and gives them back to the budget (the connection closed). */
  discard(): void {
    this.#budget?.give(this.#held.length);
    this.#held.clear();
    this.#total = 0;
  }

  /** Appends a chunk and returns every complete packet in it, in order. */
  push(chunk: Uint8Array): ClientPacket[] {
    const out: ClientPacket[] = [];
    let pos = 0;
    if (this.#held.length > 0) {
      pos = this.#completeHeld(chunk, out);
      if (pos < 0) return out; // the held packet is still not whole: all of `chunk` is held
    }
    while (pos < chunk.length) {
      const header = readBoundedHeader(chunk, pos, this.#limits, this.#connected);
      if (header === null) break; // need more bytes for the fixed header
      const bodyStart = pos + header.headerBytes;
      const end = bodyStart + header.remaining;
      if (end > chunk.length) break; // need more bytes for the body (bounded above)
      try {
        out.push(this.#decodeBody(header.byte1, chunk, bodyStart, end));
      } catch (err) {
        if (err instanceof ProtocolError) err.packetType = header.byte1 >> 4;
        throw err;
      }
      pos = end;
    }
    if (pos < chunk.length) this.#hold(chunk.subarray(pos));
    return out;
  }

  /**
   * Keeps `bytes` of the unfinished packet, copied so the caller may reuse its read buffer,
   * once the budget has room for them; throws {@link PartialPacketsFullError} when it has not.
   */
  #hold(bytes: Uint8Array): void {
    if (this.#budget !== null && !this.#budget.take(bytes.length)) {
      throw new PartialPacketsFullError(bytes.length, this.#budget);
    }
    this.#held.append(bytes, this.#total); // a copy: the caller may reuse its read buffer
  }

  /**
   * The held packet, completed from the front of `chunk` and decoded into `out`; returns where
   * the rest of `chunk` starts, or -1 when `chunk` does not complete it (then all of it is held
   * too). The held bytes are joined to the rest once, when the packet is whole: joining them at
   * every read would copy a large packet once per read. Only the held packet's bytes of `chunk`
   * are copied: joining the whole chunk to the tail would copy every read of a flood.
   */
  #completeHeld(chunk: Uint8Array, out: ClientPacket[]): number {
    if (this.#total === 0) {
      // The fixed header is at most 5 bytes, so fewer than 5 are held: join them to the
      // front of the chunk to read it.
      const head = concatBytes([this.#held.bytes, chunk.subarray(0, 5)]);
      const header = readBoundedHeader(head, 0, this.#limits, this.#connected);
      if (header !== null) this.#total = header.headerBytes + header.remaining;
    }
    const taken = this.#total - this.#held.length;
    if (this.#total === 0 || taken > chunk.length) {
      this.#hold(chunk);
      return -1;
    }
    const total = this.#total;
    const packet = concatBytes(
      [this.#held.bytes, chunk.subarray(0, taken)],
      total,
    );
    this.discard();
    const header = readFixedHeader(packet, 0, total)!;
    try {
      out.push(this.#decodeBody(header.byte1, packet, header.headerBytes, total));
    } catch (err) {
      if (err instanceof ProtocolError) err.packetType = header.byte1 >> 4;
      throw err;
    }
    return taken;
  }

  #decodeConnect(b: Uint8Array, start: number, end: number): ClientPacket {
    if (this.#connected) throw new ProtocolError("MQTT-3.1.0-2", "Second CONNECT");
    const p = decodeConnect(b, start, end, this.#limits, this.#levels);
    this.#connected = true;
    if (p.type === "connect" && p.protocolLevel === 5) {
      this.#v5 = new V5State(this.#limits);
      this.#v5.sessionExpiryZero = (p.properties?.sessionExpiry ?? 0) === 0;
    }
    return p;
  }

  /** PUBREC, PUBREL or PUBCOMP: a packet id (MQTT 5: and maybe a reason code, properties). */
  #qosFlow(type: QosFlowPacket["type"], b: Uint8Array, start: number, end: number): ClientPacket {
    if (this.#v5 !== null) return decodeQosFlow5(type, b, start, end);
    return { type, packetId: decodeIdOnly(b, start, end, type.toUpperCase()) };
  }

  #decodeBody(byte1: number, b: Uint8Array, start: number, end: number): ClientPacket {
    const type = byte1 >> 4;
    const flags = byte1 & 0x0f;
    if (!this.#connected && type !== PacketType.CONNECT) {
      throw new ProtocolError("MQTT-3.1.0-1", "First packet is not CONNECT");
    }
    switch (type) {
      case PacketType.CONNECT:
        expectFlags(flags, 0, "CONNECT", "MQTT-2.2.2-2");
        return this.#decodeConnect(b, start, end);
      case PacketType.PUBLISH:
        this.#lastTopic ??= { bytes: null, topic: "" };
        return decodePublish(flags, b, start, end, this.#limits, this.#lastTopic, this.#v5);
      case PacketType.PUBACK:
        expectFlags(flags, 0, "PUBACK", "MQTT-2.2.2-2");
        if (this.#v5 !== null) return decodePuback5(b, start, end);
        return { type: "puback", packetId: decodeIdOnly(b, start, end, "PUBACK") };
      case PacketType.PUBREC:
        expectFlags(flags, 0, "PUBREC", "MQTT-2.2.2-2");
        return this.#qosFlow("pubrec", b, start, end);
      case PacketType.PUBREL:
        expectFlags(flags, 2, "PUBREL", "MQTT-3.6.1-1");
        return this.#qosFlow("pubrel", b, start, end);
      case PacketType.PUBCOMP:
        expectFlags(flags, 0, "PUBCOMP", "MQTT-2.2.2-2");
        return this.#qosFlow("pubcomp", b, start, end);
      case PacketType.SUBSCRIBE:
        expectFlags(flags, 2, "SUBSCRIBE", "MQTT-3.8.1-1");
        if (this.#v5 !== null) return decodeSubscription5("subscribe", b, start, end, this.#v5);
        return decodeSubscribe(b, start, end);
      case PacketType.UNSUBSCRIBE:
        expectFlags(flags, 2, "UNSUBSCRIBE", "MQTT-3.10.1-1");
        if (this.#v5 !== null) return decodeSubscription5("unsubscribe", b, start, end, this.#v5);
        return decodeUnsubscribe(b, start, end);
      case PacketType.PINGREQ:
        expectFlags(flags, 0, "PINGREQ", "MQTT-2.2.2-2");
        expectEmpty(start, end, "PINGREQ");
        return { type: "pingreq" };
      case PacketType.DISCONNECT:
        expectFlags(flags, 0, "DISCONNECT", "MQTT-2.2.2-2");
        if (this.#v5 !== null) return decodeDisconnect5(b, start, end, this.#v5);
        expectEmpty(start, end, "DISCONNECT");
        return { type: "disconnect" };
      case AUTH:
        // No enhanced authentication: a CONNECT with a method was refused (CONNACK 0x8C), so
        // an AUTH afterwards is a Protocol Error [MQTT-4.12.0-1]. On 3.1.1, type 15 is reserved.
        if (this.#v5 !== null) {
          throw new ProtocolError("MQTT-4.12.0-1", "AUTH without an authentication method", 0x82);
        }
        throw new ProtocolError("MQTT-2.2.1", `Reserved packet type ${type}`);
      case PacketType.CONNACK:
      case PacketType.SUBACK:
      case PacketType.UNSUBACK:
      case PacketType.PINGRESP:
        throw new ProtocolError("MQTT-2.2.1", `Server-only packet type ${type} sent by a client`);
      default:
        throw new ProtocolError("MQTT-2.2.1", `Reserved packet type ${type}`);
    }
  }
}

function expectFlags(flags: number, want: number, name: string, rule: string): void {
  if (flags !== want) {
    throw new ProtocolError(rule, `${name} has reserved flags 0x${flags.toString(16)}`);
  }
}

function expectEmpty(start: number, end: number, name: string): void {
  if (end !== start) throw new ProtocolError("MQTT-2.2.3", `${name} must have no body`);
}

function decodeIdOnly(b: Uint8Array, start: number, end: number, name: string): number {
  if (end - start !== 2) throw new ProtocolError("MQTT-2.2.3", `${name} must be 2 bytes`);
  const id = (b[start] << 8) | b[start + 1];
  if (id === 0) throw new ProtocolError("MQTT-2.3.1-1", `${name} with packet identifier 0`);
  return id;
}

function decodePublish(
  flags: number,
  b: Uint8Array,
  start: number,
  end: number,
  limits: DecoderLimits,
  last: LastTopic,
  v5: V5State | null,
): PublishPacket {
  const qos = (flags >> 1) & 0x03;
  if (qos === 3) throw new ProtocolError("MQTT-3.3.1-4", "PUBLISH with QoS 3");
  const dup = (flags & 0x08) !== 0;
  if (qos === 0 && dup) throw new ProtocolError("MQTT-3.3.1-2", "DUP set on a QoS 0 PUBLISH");
  if (end - start < 2) throw truncated();
  const topicLen = (b[start] << 8) | b[start + 1];
  const topicEnd = start + 2 + topicLen;
  if (topicEnd > end) throw truncated();
  if (topicLen > limits.maxTopicBytes) {
    throw new ProtocolError(
      "MQTT-4.7.3-3",
      `Topic of ${topicLen} bytes exceeds max_topic_bytes ${limits.maxTopicBytes}`,
    );
  }
  // An empty MQTT 5 topic is given by its topic alias (below).
  const topic = topicLen === 0 && v5 !== null
    ? ""
    : readTopic(b, start + 2, topicEnd, limits, last);
  let pos = topicEnd;
  let packetId = 0;
  if (qos > 0) {
    if (pos + 2 > end) throw truncated();
    packetId = (b[pos] << 8) | b[pos + 1];
    if (packetId === 0) throw new ProtocolError("MQTT-2.3.1-1", "PUBLISH with packet identifier 0");
    pos += 2;
  }
  if (v5 !== null) return decodePublishTail5(flags, b, pos, end, topic, qos, packetId, v5);
  return {
    type: "publish",
    topic,
    qos: qos as 0 | 1 | 2,
    retain: (flags & 0x01) !== 0,
    dup,
    packetId,
    payload: copyBytes(b, pos, end),
  };
}

/** The rest of an MQTT 5 PUBLISH: properties, the topic alias, the payload. */
function decodePublishTail5(
  flags: number,
  b: Uint8Array,
  pos: number,
  end: number,
  topic: string,
  qos: number,
  packetId: number,
  v5: V5State,
): PublishPacket {
  const { properties, payloadStart } = readPublishProperties(b, pos, end, v5);
  const resolved = v5.resolveAlias(topic, properties.topicAlias);
  return {
    type: "publish",
    topic: resolved,
    qos: qos as 0 | 1 | 2,
    retain: (flags & 0x01) !== 0,
    dup: (flags & 0x08) !== 0,
    packetId,
    payload: copyBytes(b, payloadStart, end),
    properties,
  };
}

function decodeSubscribe(b: Uint8Array, start: number, end: number): ClientPacket {
  const r = new Reader(b, start, end);
  const packetId = packetIdOf(r, "SUBSCRIBE");
  const subscriptions: Subscription[] = [];
  while (r.left > 0) {
    const filter = readTopicFilter(r);
    const qosByte = r.u8();
    if (qosByte & 0xfc) throw new ProtocolError("MQTT-3.8.3-4", "SUBSCRIBE reserved bits set");
    if (qosByte === 3) throw new ProtocolError("MQTT-3.8.3-4", "SUBSCRIBE requested QoS 3");
    subscriptions.push({ filter, qos: qosByte as 0 | 1 | 2 });
  }
  requireSubscriptions(subscriptions.length);
  return { type: "subscribe", packetId, subscriptions };
}

function decodeUnsubscribe(b: Uint8Array, start: number, end: number): ClientPacket {
  const r = new Reader(b, start, end);
  const packetId = packetIdOf(r, "UNSUBSCRIBE");
  return { type: "unsubscribe", packetId, filters: unsubscribeFilters(r) };
}

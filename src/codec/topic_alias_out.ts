/**
 * Server-to-client topic aliases [MQTT-3.3.2.3.4]: an MQTT 5 client that sets Topic Alias
 * Maximum > 0 in its CONNECT gets each topic in full once with an alias, then the alias alone
 * (an empty topic name) while that alias still stands for it.
 *
 * Applied to the finished PUBLISH as it is queued for the socket, in write order, so the
 * client learns each alias before its first bare use; the copies shared between subscribers
 * (a QoS 0 message is encoded once) are never changed: a rewritten packet is a new array.
 * When every alias is taken, the one used least recently is given to the new topic (the
 * PUBLISH that does so carries the topic, which rebinds the alias at the client
 * [MQTT-3.3.2-12]).
 *
 * @module
 */
import { Prop } from "./properties.ts";
import { remainingLength } from "./encoder.ts";

const latin1 = new TextDecoder("latin1");

/** The alias table of one connection's outbound direction. */
export class OutboundTopicAliases {
  /** Topic (its bytes as latin1) → alias; Map order is recency, least recent first. */
  readonly #byTopic = new Map<string, number>();
  readonly #max: number;

  /** @param max aliases at most: min(the client's Topic Alias Maximum, our bound); ≥ 1. */
  constructor(max: number) {
    this.#max = max;
  }

  /** A table of `max` aliases; null when `max` is 0 (full topics always). */
  static upTo(max: number): OutboundTopicAliases | null {
    return max > 0 ? new OutboundTopicAliases(max) : null;
  }

  /** Aliases in use (tests, metrics). */
  get size(): number {
    return this.#byTopic.size;
  }

  /**
   * `packet` (a whole MQTT 5 PUBLISH, as encodePublish makes it) with a Topic Alias property,
   * and no topic name when the alias already stands for it.
   */
  apply(packet: Uint8Array): Uint8Array {
    let pos = 1;
    while (packet[pos++] & 0x80); // remaining length: its value is recomputed below
    const topicLength = (packet[pos] << 8) | packet[pos + 1];
    const topicStart = pos + 2;
    const topicEnd = topicStart + topicLength;
    if (topicLength === 0) return packet;
    const topic = latin1.decode(packet.subarray(topicStart, topicEnd));
    let alias = this.#byTopic.get(topic);
    let known = alias !== undefined;
    if (known) this.#byTopic.delete(topic); // re-inserted below as the most recent
    else if (this.#byTopic.size < this.#max) alias = this.#byTopic.size + 1;
    else {
      const [oldest, reused] = this.#byTopic.entries().next().value!;
      this.#byTopic.delete(oldest);
      alias = reused;
      known = false;
    }
    this.#byTopic.set(topic, alias!);
    return rewrite(packet, topicStart, topicEnd, alias!, known);
  }
}

/** The PUBLISH with the alias property first in its block and, when `bare`, no topic name. */
function rewrite(
  packet: Uint8Array,
  topicStart: number,
  topicEnd: number,
  alias: number,
  bare: boolean,
): Uint8Array {
  const qos = (packet[0] >> 1) & 3;
  const idEnd = topicEnd + (qos > 0 ? 2 : 0);
  let pos = idEnd;
  let propsLength = 0;
  for (let mult = 1;; mult *= 128) {
    const digit = packet[pos++];
    propsLength += (digit & 0x7f) * mult;
    if ((digit & 0x80) === 0) break;
  }
  const propsStart = pos;
  const rest = packet.subarray(propsStart); // the old properties, then the payload
  const topicBytes = bare ? 0 : topicEnd - topicStart;
  const newPropsLength = propsLength + 3;
  const newPropsHeader = remainingLength(newPropsLength);
  const remaining = 2 + topicBytes + (idEnd - topicEnd) + newPropsHeader.length + 3 + rest.length;
  const header = remainingLength(remaining);
  const out = new Uint8Array(1 + header.length + remaining);
  out[0] = packet[0];
  let at = 1;
  for (const d of header) out[at++] = d;
  out[at++] = topicBytes >> 8;
  out[at++] = topicBytes & 0xff;
  if (!bare) {
    out.set(packet.subarray(topicStart, topicEnd), at);
    at += topicBytes;
  }
  out.set(packet.subarray(topicEnd, idEnd), at); // the packet id
  at += idEnd - topicEnd;
  for (const d of newPropsHeader) out[at++] = d;
  out[at++] = Prop.TOPIC_ALIAS;
  out[at++] = alias >> 8;
  out[at++] = alias & 0xff;
  out.set(rest, at);
  return out;
}

/**
 * The MQTT 5 side of routing: message expiry (the time left goes out; an
 * expired message is not delivered to anyone), No Local, Retain As Published, subscription
 * identifiers, and the properties a v5 subscriber gets back from the stored headers. 3.1.1
 * subscribers get none of this: their copies are encoded without a property field.
 *
 * Retain Handling needs no code: there is no retained store, so no subscription ever gets
 * retained messages at SUBSCRIBE, whatever it asked.
 *
 * @module
 */
import { wallClock } from "../base/wall_clock.ts";
import { encodeMessageProperties, withSubscriptionIds } from "../codec/encode_v5.ts";
import type { MessageProperties } from "../codec/packets.ts";
import { H_CLIENT_ID, H_RETAIN } from "../stored/envelope.ts";
import { readStoredProperties, storedExpiry } from "../stored/envelope_v5.ts";
import type { StoredMessage } from "../log/port.ts";
import type { Subscription } from "./registry.ts";

/** Seconds of a message's expiry interval left now; null when it has none (MQTT 5 §3.3.2.3.3). */
export function expiryLeft(m: StoredMessage): number | null {
  const interval = storedExpiry(m.headers);
  if (interval === null) return null;
  // Counted from the timestamp moved by the clock's forward steps since (a step ages nothing).
  const passedMicros = wallClock.nowMicros() - wallClock.correctedMicros(m.timestampMicros);
  return interval - Math.floor(passedMicros / 1_000_000);
}

/** No Local [MQTT-3.8.3-3]: the subscriber published this message itself. */
export function isOwnMessage<C>(s: Subscription<C>, m: StoredMessage, clientId: string): boolean {
  return s.options?.noLocal === true && m.headers.get(H_CLIENT_ID) === clientId;
}

/** The RETAIN flag of a copy: only with Retain As Published [MQTT-3.3.1-12]. */
export function retainOf<C>(s: Subscription<C>, m: StoredMessage): boolean {
  return s.options?.retainAsPublished === true && m.headers.get(H_RETAIN) === "true";
}

/**
 * The property blocks of one routed message for MQTT 5 subscribers, made on first use (a
 * message routed only to 3.1.1 subscribers costs nothing here).
 */
export class OutboundProperties {
  #shared: Uint8Array | null = null;
  readonly #m: StoredMessage;
  readonly #left: number | null;

  constructor(m: StoredMessage, left: number | null) {
    this.#m = m;
    this.#left = left;
  }

  /**
   * The block for one copy: the message's properties plus the subscription identifiers of
   * every subscription of that client the message matched [MQTT-3.3.4-3].
   */
  for(ids: readonly number[]): Uint8Array {
    const shared = this.#shared ??= this.#encodeShared();
    return ids.length > 0 ? withSubscriptionIds(shared, ids) : shared;
  }

  #encodeShared(): Uint8Array {
    const stored = readStoredProperties(this.#m.headers);
    if (stored === null) return new Uint8Array(0); // a 3.1.1 message: no properties
    const p: MessageProperties = this.#left === null
      ? stored
      : { ...stored, messageExpiry: this.#left }; // the time left [MQTT-3.3.2-6]
    return encodeMessageProperties(p);
  }
}

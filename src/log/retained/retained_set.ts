/**
 * The retained set in memory: per MQTT topic, its last retained message, as the retained
 * record topic (`retained_store.ts`) says it is. One entry is the message's stored form in one
 * array (its header blob, `header_blob.ts`, then its payload) and the time it was set; headers
 * are decoded only when a subscription asks for the message, so an entry costs its bytes plus a
 * small object and a map slot (measured by `deno task bench`, docs/BENCHMARKS.md).
 *
 * Bounded: at most `maxMessages` topics and `maxBytes` stored bytes (topic + blob + payload);
 * {@link RetainedSet.room} says whether a new or larger message fits.
 *
 * @module
 */
import { filterMatches, isWildcardFilter } from "../../mapping/filter.ts";
import { decodeHeaders, encodeHeaders } from "../header_blob.ts";
import type { OutgoingMessage, StoredMessage } from "../port.ts";
import { utf8Length } from "../../base/utf8.ts";

/** One retained message. */
export interface RetainedEntry {
  readonly topic: string;
  /** Header blob, then payload. */
  readonly stored: Uint8Array;
  /** Where the payload starts in `stored`. */
  readonly payloadAt: number;
  /** When it was set (append time of the set), µs since the epoch: Message Expiry counts from it. */
  readonly atMicros: number;
  /** Bytes counted against `limits.max_retained_bytes`. */
  readonly bytes: number;
}

/** Bounds of the set (`[limits]`). */
export interface RetainedBounds {
  readonly maxMessages: number;
  readonly maxBytes: number;
  /** One retained message's stored bytes (topic + headers + payload) at most. */
  readonly maxMessageBytes: number;
}

/** Why a retained message does not fit, or null when it does. */
export type RetainedRoom =
  | null
  | "max_retained_messages"
  | "max_retained_bytes"
  | "max_retained_message_bytes";

/** The entry of `message` (an envelope) under `topic`, set at `atMicros`. */
export function entryOf(topic: string, message: OutgoingMessage, atMicros: number): RetainedEntry {
  const blob = encodeHeaders(message.headers);
  const stored = new Uint8Array(blob.length + message.payload.length);
  stored.set(blob, 0);
  stored.set(message.payload, blob.length);
  return {
    topic,
    stored,
    payloadAt: blob.length,
    atMicros,
    bytes: utf8Length(topic) + stored.length,
  };
}

/** The entry as a stored message (headers decoded), for routing it to a subscriber. */
export function messageOf(e: RetainedEntry): StoredMessage {
  return {
    partition: 0,
    offset: 0,
    timestampMicros: e.atMicros,
    payload: e.stored.subarray(e.payloadAt),
    headers: decodeHeaders(e.stored, 0, e.payloadAt),
  };
}

/** Topic → retained message, bounded. */
export class RetainedSet {
  readonly #entries = new Map<string, RetainedEntry>();
  readonly #bounds: RetainedBounds;
  #bytes = 0;

  constructor(bounds: RetainedBounds) {
    this.#bounds = bounds;
  }

  /** Retained topics. */
  get size(): number {
    return this.#entries.size;
  }

  /** Stored bytes of every retained message (topic + headers + payload). */
  get bytes(): number {
    return this.#bytes;
  }

  get bounds(): RetainedBounds {
    return this.#bounds;
  }

  get(topic: string): RetainedEntry | undefined {
    return this.#entries.get(topic);
  }

  /** Whether a message of `bytes` stored bytes may become `topic`'s retained message. */
  room(topic: string, bytes: number): RetainedRoom {
    const b = this.#bounds;
    if (bytes > b.maxMessageBytes) return "max_retained_message_bytes";
    const old = this.#entries.get(topic);
    if (old === undefined && this.#entries.size >= b.maxMessages) return "max_retained_messages";
    if (this.#bytes - (old?.bytes ?? 0) + bytes > b.maxBytes) return "max_retained_bytes";
    return null;
  }

  /** Sets `e` as its topic's retained message when it fits; whether it did. */
  put(e: RetainedEntry): boolean {
    if (this.room(e.topic, e.bytes) !== null) return false;
    const old = this.#entries.get(e.topic);
    this.#bytes += e.bytes - (old?.bytes ?? 0);
    this.#entries.set(e.topic, e);
    return true;
  }

  /** Clears a topic's retained message; whether there was one. */
  delete(topic: string): boolean {
    const old = this.#entries.get(topic);
    if (old === undefined) return false;
    this.#bytes -= old.bytes;
    this.#entries.delete(topic);
    return true;
  }

  /** Empties the set. */
  clear(): void {
    this.#entries.clear();
    this.#bytes = 0;
  }

  /** The retained messages whose topic `filter` matches (well-formed filter). */
  matching(filter: string): RetainedEntry[] {
    if (!isWildcardFilter(filter)) {
      const e = this.#entries.get(filter);
      return e === undefined ? [] : [e];
    }
    const out: RetainedEntry[] = [];
    for (const e of this.#entries.values()) if (filterMatches(filter, e.topic)) out.push(e);
    return out;
  }

  /** Every retained message, in no particular order. */
  entries(): IterableIterator<RetainedEntry> {
    return this.#entries.values();
  }
}

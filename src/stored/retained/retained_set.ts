/**
 * The retained set in memory: per MQTT topic, its last retained message, as the retained
 * record topic (`retained_store.ts`) says it is. One entry is the message's stored form (its
 * header blob, `header_blob.ts`, then its payload) and the time it was set; headers are decoded
 * only when a subscription asks for the message. The stored form is kept as a one-byte string,
 * a char per byte: a string costs its length plus 16 bytes of heap, where a Uint8Array of its
 * own costs about 200 more (the typed array, its buffer, the buffer's backing store), which was
 * most of an entry's cost. An entry is then a map slot, the topic, a small object and that
 * string (`deno task bench --scenarios=retained` measures it).
 *
 * Bounded: at most `maxMessages` topics and `maxBytes` stored bytes (topic + blob + payload);
 * {@link RetainedSet.room} says whether a new or larger message fits.
 *
 * @module
 */
import { filterMatches, isWildcardFilter } from "../../mapping/filter.ts";
import { decodeHeaders, encodeHeaders } from "../../log/header_blob.ts";
import { H_PACKET_ID } from "../envelope.ts";
import type { OutgoingMessage, StoredMessage } from "../../log/port.ts";
import { utf8Length } from "../../base/utf8.ts";

/** One retained message. */
export interface RetainedEntry {
  readonly topic: string;
  /** Header blob, then payload, a char per byte ({@link messageOf} reads it back). */
  readonly stored: string;
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
  const headers = new Map(message.headers);
  headers.delete(H_PACKET_ID); // the publisher's, of no use to a subscriber
  const blob = encodeHeaders(headers);
  const both = new Uint8Array(blob.length + message.payload.length);
  both.set(blob, 0);
  both.set(message.payload, blob.length);
  const stored = byteString(both); // one string, not a concatenation of two (20 bytes more)
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
  const s = e.stored;
  const bytes = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) bytes[i] = s.charCodeAt(i);
  return {
    partition: 0,
    offset: 0,
    timestampMicros: e.atMicros,
    payload: bytes.subarray(e.payloadAt),
    headers: decodeHeaders(bytes, 0, e.payloadAt),
  };
}

/**
 * Bytes as a string of one char per byte: a flat one-byte string, its length in memory, up to
 * 8 KiB (longer ones are joined from 8 KiB pieces: a few dozen bytes more per piece).
 */
function byteString(b: Uint8Array): string {
  if (b.length <= 8192) return String.fromCharCode(...b);
  let s = "";
  for (let i = 0; i < b.length; i += 8192) {
    s += String.fromCharCode(...b.subarray(i, Math.min(b.length, i + 8192)));
  }
  return s;
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

  /**
   * The retained messages whose topic `filter` matches (well-formed filter), one at a time: a
   * set changed meanwhile is seen as it is when reached (a message cleared before is skipped).
   */
  *matching(filter: string): Generator<RetainedEntry> {
    if (!isWildcardFilter(filter)) {
      const e = this.#entries.get(filter);
      if (e !== undefined) yield e;
      return;
    }
    for (const e of this.#entries.values()) if (filterMatches(filter, e.topic)) yield e;
  }

  /** Every retained message, in no particular order. */
  entries(): IterableIterator<RetainedEntry> {
    return this.#entries.values();
  }
}

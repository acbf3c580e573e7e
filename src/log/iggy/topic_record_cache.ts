/**
 * The Iggy backend's cache of the server's topic records (ids, partition counts), so the
 * gateway's per-publish `getTopic` does not cost a round trip. (The backend-neutral cache above
 * the port, with misses and auto-create, is `log/topic_cache.ts`.) An entry lives `metadata_refresh_ms`, is dropped when a send or
 * poll says "not found", and is replaced on create. Absent topics are not cached, so a
 * topic created elsewhere shows up on the next look-up. At most {@link MAX_TOPICS} entries are
 * kept; past that the oldest entry goes (it is simply read again when needed).
 *
 * @module
 */

import type { TopicRecord } from "./v11/records.ts";

/** Reads a topic from the server (null = absent). */
export type TopicFetcher = (stream: string, topic: string) => Promise<TopicRecord | null>;

/** Bound of the cache. */
export const MAX_TOPICS = 10_000;

interface CacheEntry {
  readonly record: TopicRecord;
  readonly expiresAt: number;
}

/** The Iggy client's cache of topic records read from the server. */
export class TopicRecordCache {
  readonly #fetch: TopicFetcher;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, CacheEntry>();
  readonly #loading = new Map<string, Promise<TopicRecord | null>>();

  constructor(fetch: TopicFetcher, ttlMs: number, now: () => number = () => performance.now()) {
    this.#fetch = fetch;
    this.#ttlMs = ttlMs;
    this.#now = now;
  }

  static #key(stream: string, topic: string): string {
    return JSON.stringify([stream, topic]);
  }

  /** The topic, from cache while fresh, else from the server (concurrent misses share one read). */
  get(stream: string, topic: string): Promise<TopicRecord | null> {
    const key = TopicRecordCache.#key(stream, topic);
    const hit = this.#entries.get(key);
    if (hit && hit.expiresAt > this.#now()) return Promise.resolve(hit.record);
    let loading = this.#loading.get(key);
    if (!loading) {
      loading = this.#fetch(stream, topic).then((record) => {
        if (record) this.set(stream, topic, record);
        else this.#entries.delete(key);
        return record;
      }).finally(() => this.#loading.delete(key));
      this.#loading.set(key, loading);
    }
    return loading;
  }

  /** Stores a fresh record (after create or read). */
  set(stream: string, topic: string, record: TopicRecord): void {
    if (this.#ttlMs <= 0) return;
    const key = TopicRecordCache.#key(stream, topic);
    this.#entries.delete(key); // re-insert at the young end
    if (this.#entries.size >= MAX_TOPICS) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(key, {
      record,
      expiresAt: this.#now() + this.#ttlMs,
    });
  }

  /** Forgets a topic (the server said it is gone). */
  invalidate(stream: string, topic: string): void {
    this.#entries.delete(TopicRecordCache.#key(stream, topic));
  }

  /** Forgets everything. */
  clear(): void {
    this.#entries.clear();
  }
}

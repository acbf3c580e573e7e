/**
 * Topic metadata the publish and subscribe paths need (partition counts), cached so the hot
 * path does not ask the backend per message. Missing targets are created when `auto_create`
 * is on (P4); otherwise they stay missing and the caller denies.
 *
 * Bounds: at most `maxEntries` topics cached (the map is cleared when full); misses are
 * remembered for `missTtlMs` so a device publishing to a missing topic does not hammer the
 * backend.
 *
 * @module
 */
import type { Clock } from "../base/clock.ts";
import type { CreateTopicOptions, LogBackend, TopicInfo } from "./port.ts";

/** Options of the cache. */
export interface TopicCacheOptions {
  readonly autoCreate: boolean;
  readonly create: CreateTopicOptions;
  readonly ttlMs: number;
  readonly missTtlMs: number;
  readonly maxEntries: number;
  /** Sees every topic looked up or created (durability warnings). */
  readonly onFound?: (info: TopicInfo | null) => void;
}

interface Entry {
  readonly info: TopicInfo | null;
  readonly at: number;
}

/** Partition-count cache with optional auto-create. */
export class TopicCache {
  #backend: Pick<LogBackend, "getTopic" | "createTopic">;
  #opts: TopicCacheOptions;
  #clock: Clock;
  #entries = new Map<string, Entry>();
  #inflight = new Map<string, Promise<TopicInfo | null>>();
  /**
   * The last entry peek() found: publishers mostly repeat their target, and comparing two
   * strings (usually the same instances) is cheaper than building the key and hashing it.
   * Forgotten whenever the entries change.
   */
  #lastStream = "";
  #lastTopic = "";
  #lastEntry: Entry | undefined;

  constructor(
    backend: Pick<LogBackend, "getTopic" | "createTopic">,
    opts: TopicCacheOptions,
    clock: Clock,
  ) {
    this.#backend = backend;
    this.#opts = opts;
    this.#clock = clock;
  }

  /** Cached answer: info, null (known missing), or undefined (unknown or stale). */
  peek(stream: string, topic: string): TopicInfo | null | undefined {
    let e = this.#lastEntry;
    if (e === undefined || stream !== this.#lastStream || topic !== this.#lastTopic) {
      e = this.#entries.get(key(stream, topic));
      if (!e) return undefined;
      this.#lastStream = stream;
      this.#lastTopic = topic;
      this.#lastEntry = e;
    }
    const age = this.#clock.now() - e.at;
    if (age > (e.info ? this.#opts.ttlMs : this.#opts.missTtlMs)) return undefined;
    return e.info;
  }

  /** Looks the topic up (creating it when `auto_create` is on); null when it is missing. */
  lookup(stream: string, topic: string): Promise<TopicInfo | null> {
    const k = key(stream, topic);
    const running = this.#inflight.get(k);
    if (running) return running;
    const p = this.#fetch(stream, topic).finally(() => this.#inflight.delete(k));
    this.#inflight.set(k, p);
    return p;
  }

  /** Forgets a topic (after a not-found error from the backend). */
  invalidate(stream: string, topic: string): void {
    this.#lastEntry = undefined;
    this.#entries.delete(key(stream, topic));
  }

  async #fetch(stream: string, topic: string): Promise<TopicInfo | null> {
    let info = await this.#backend.getTopic(stream, topic);
    if (info === null && this.#opts.autoCreate) {
      info = await this.#backend.createTopic(stream, topic, this.#opts.create);
    }
    this.#opts.onFound?.(info);
    this.#lastEntry = undefined;
    if (this.#entries.size >= this.#opts.maxEntries) this.#entries.clear();
    this.#entries.set(key(stream, topic), { info, at: this.#clock.now() });
    return info;
  }
}

function key(stream: string, topic: string): string {
  return stream + "\u0000" + topic;
}

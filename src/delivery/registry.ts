/**
 * The subscription registry (S4): filter as subscribed → { subscriber → granted QoS and the
 * offset per triple from which the subscription sees messages }. Routing a message's
 * `mqtt.topic` (R2) is a hash lookup for exact filters and a walk of the topic trie for
 * wildcard filters (`topic_trie.ts`), never a scan of all filters.
 *
 * @module
 */
import type { SubscriptionOptions } from "../codec/packets.ts";
import { TopicTrie } from "./topic_trie.ts";

/** A triple: one partition of one Iggy topic, where an MQTT topic's messages live. */
export interface Triple {
  readonly stream: string;
  readonly topic: string;
  readonly partition: number;
}

/** Key of a triple in maps (stored in session records too), and the triple a key names. */
export { partitionKey as tripleKey, partitionOfKey as tripleOfKey } from "../log/port.ts";

/** One client's subscription to one filter. */
export interface Subscription<C> {
  readonly client: C;
  qos: 0 | 1 | 2;
  /** MQTT 5 subscription options (No Local, Retain As Published, identifier); absent on 3.1.1. */
  options?: SubscriptionOptions;
  /**
   * Per triple key: the first offset this subscription may receive. A triple whose backlog a
   * catch-up is still delivering has `Infinity` here until it hands over (`catch_up.ts`).
   */
  readonly startOffsets: Map<string, number>;
  /** What topics are matched against: the filter without a `$replay/<from>/` prefix. */
  readonly match: string;
  /** Put before the topic of every copy: "" or the `$replay/<from>/` prefix. */
  readonly prefix: string;
  /** `match` has a `+` or `#` level. */
  readonly wildcard: boolean;
  /** A shared subscription (`$share/<group>/<filter>`): its group (`share/groups.ts`). */
  share?: ShareGroup<C>;
}

/** The members of one shared subscription, a (group, filter) [MQTT-4.8.2]. */
export interface ShareGroup<C> {
  /** `<group>/<filter>`, as the `$share/` filter names them. */
  readonly key: string;
  readonly members: Subscription<C>[];
  /** Round robin: the member tried first for the next message. */
  next: number;
  /**
   * Triple keys this gateway deals to the group (the log's consumer group split them between
   * gateways, `share/spread.ts`); absent: every one.
   */
  owned?: Set<string>;
}

/** Registry of subscriptions: exact filters hashed, wildcard filters in a topic trie. */
export class SubscriptionRegistry<C> {
  #byTopic = new Map<string, Map<C, Subscription<C>>>();
  #byClient = new Map<C, Map<string, Subscription<C>>>();
  /** Exact `match` → its subscriptions (R2 fast path). */
  #exact = new Map<string, Set<Subscription<C>>>();
  #trie = new TopicTrie<Subscription<C>>();

  /** Subscriptions of a filter as subscribed, or undefined. */
  lookup(topic: string): ReadonlyMap<C, Subscription<C>> | undefined {
    return this.#byTopic.get(topic);
  }

  /** Subscriptions whose exact filter is `topic` (R2), or undefined. */
  exact(topic: string): ReadonlySet<Subscription<C>> | undefined {
    return this.#exact.get(topic);
  }

  /** Whether any wildcard subscription exists (the router's slow path is needed). */
  get hasWildcards(): boolean {
    return this.#trie.size > 0;
  }

  /** Calls `visit` with every wildcard subscription whose filter matches `topic`. */
  matchWildcards(topic: string, visit: (s: Subscription<C>) => void): void {
    this.#trie.match(topic, visit);
  }

  /** The client's subscription to `topic`, if any. */
  get(client: C, topic: string): Subscription<C> | undefined {
    return this.#byClient.get(client)?.get(topic);
  }

  /** Number of topics the client is subscribed to. */
  countFor(client: C): number {
    return this.#byClient.get(client)?.size ?? 0;
  }

  /** Adds or replaces [MQTT-3.8.4-3] a subscription. */
  upsert(sub: Subscription<C>, topic: string): void {
    let t = this.#byTopic.get(topic);
    if (!t) this.#byTopic.set(topic, t = new Map());
    t.set(sub.client, sub);
    let c = this.#byClient.get(sub.client);
    if (!c) this.#byClient.set(sub.client, c = new Map());
    const old = c.get(topic);
    if (old !== undefined && old !== sub) this.#unindex(old);
    c.set(topic, sub);
    if (sub.wildcard) this.#trie.add(sub.match, sub);
    else {
      let e = this.#exact.get(sub.match);
      if (!e) this.#exact.set(sub.match, e = new Set());
      e.add(sub);
    }
  }

  #unindex(sub: Subscription<C>): void {
    if (sub.wildcard) {
      this.#trie.remove(sub.match, sub);
      return;
    }
    const e = this.#exact.get(sub.match);
    e?.delete(sub);
    if (e?.size === 0) this.#exact.delete(sub.match);
  }

  /** Removes one subscription; returns it when it existed. */
  remove(client: C, topic: string): Subscription<C> | undefined {
    const c = this.#byClient.get(client);
    const sub = c?.get(topic);
    if (!sub) return undefined;
    c!.delete(topic);
    if (c!.size === 0) this.#byClient.delete(client);
    const t = this.#byTopic.get(topic)!;
    t.delete(client);
    if (t.size === 0) this.#byTopic.delete(topic);
    this.#unindex(sub);
    return sub;
  }

  /** Removes every subscription of a client; returns them with their topics. */
  removeClient(client: C): [string, Subscription<C>][] {
    const c = this.#byClient.get(client);
    if (!c) return [];
    const out = [...c.entries()];
    for (const [topic] of out) this.remove(client, topic);
    return out;
  }

  /** Every subscribed filter (for re-resolution after a map reload). */
  topics(): string[] {
    return [...this.#byTopic.keys()];
  }

  /** The client's subscriptions by filter as subscribed. */
  ofClient(client: C): ReadonlyMap<string, Subscription<C>> | undefined {
    return this.#byClient.get(client);
  }
}

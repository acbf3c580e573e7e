/**
 * The subscription registry (S4): exact MQTT topic → { subscriber → granted QoS and the
 * offset per triple from which the subscription sees messages }. Routing is a hash lookup
 * of a message's `mqtt.topic` (R2), never a scan.
 *
 * @module
 */
import type { SubscriptionOptions } from "../codec/packets.ts";

/** A triple: one partition of one Iggy topic, where an MQTT topic's messages live. */
export interface Triple {
  readonly stream: string;
  readonly topic: string;
  readonly partition: number;
}

/** Key of a triple in maps. */
export function tripleKey(t: Triple): string {
  return `${t.stream}\u0000${t.topic}\u0000${t.partition}`;
}

/** One client's subscription to one MQTT topic. */
export interface Subscription<C> {
  readonly client: C;
  qos: 0 | 1;
  /** MQTT 5 subscription options (No Local, Retain As Published, identifier); absent on 3.1.1. */
  options?: SubscriptionOptions;
  /** Per triple key: the first offset this subscription may receive. */
  readonly startOffsets: Map<string, number>;
}

/** Registry of exact-topic subscriptions. */
export class SubscriptionRegistry<C> {
  #byTopic = new Map<string, Map<C, Subscription<C>>>();
  #byClient = new Map<C, Map<string, Subscription<C>>>();

  /** Subscriptions of an MQTT topic (R2), or undefined. */
  lookup(topic: string): ReadonlyMap<C, Subscription<C>> | undefined {
    return this.#byTopic.get(topic);
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
    c.set(topic, sub);
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

  /** Every subscribed topic (for re-resolution after a map reload). */
  topics(): string[] {
    return [...this.#byTopic.keys()];
  }
}

/**
 * Subscriptions after the topic map or the set of targets changed: SIGHUP re-resolves every
 * subscription against the new map; a wildcard subscription also joins a target that appeared
 * after its SUBSCRIBE when this gateway appends to it.
 *
 * @module
 */
import { canPoll } from "../access/permissions.ts";
import { SUBACK_FAILURE } from "../codec/encoder.ts";
import { type CompiledMap, resolveTopic } from "../mapping/mod.ts";
import type { ClientQueue } from "./client_queue.ts";
import { filterTriples } from "./filter_triples.ts";
import { type Subscription, type Triple, tripleKey } from "./registry.ts";
import type { SharedReader } from "./reader.ts";
import type { Subscriptions } from "./subscribe.ts";

/**
 * After a topic-map reload: an exact subscription whose resolution (stream, topic, key) changed
 * is subscribed again under the new map with its granted QoS; a wildcard subscription is
 * re-targeted ({@link retarget}). A filter that no longer resolves to anything allowed is
 * dropped (and logged). Returns how many subscriptions moved.
 */
export async function reresolve(subs: Subscriptions, previous: CompiledMap): Promise<number> {
  let moved = 0;
  for (const filter of subs.registry.topics()) {
    const list = [...(subs.registry.lookup(filter)?.values() ?? [])];
    if (list.length === 0) continue;
    if (list[0].wildcard) {
      for (const s of list) if (await retarget(subs, s, filter)) moved++;
      continue;
    }
    const before = resolveTopic(previous, list[0].match);
    const after = resolveTopic(subs.tripleDeps.preparer.map, list[0].match);
    if (
      before.stream === after.stream && before.topic === after.topic &&
      before.partitionKey === after.partitionKey
    ) continue;
    for (const s of list) {
      const queue = s.client;
      subs.registry.remove(queue, filter);
      subs.release(s);
      const code = await subs.subscribeOne(queue, {
        filter,
        qos: s.qos,
        ...(s.options ? { options: s.options } : {}),
      });
      if (code >= SUBACK_FAILURE) dropped(subs, queue, filter);
      moved++;
    }
  }
  return moved;
}

/**
 * Resolves a wildcard subscription again: readers of new triples are joined from their next
 * offset, triples no longer resolved are released, kept triples keep their start offsets.
 * Returns whether its triples changed.
 */
export async function retarget(
  subs: Subscriptions,
  s: Subscription<ClientQueue>,
  filter: string,
): Promise<boolean> {
  const queue = s.client;
  let resolved;
  try {
    resolved = await filterTriples(subs.tripleDeps, queue.sub.principal, s.match);
  } catch {
    return false; // backend trouble: keep what it has
  }
  if (subs.registry.get(queue, filter) !== s) return false; // gone meanwhile
  if (resolved.refused !== undefined) {
    subs.registry.remove(queue, filter);
    subs.release(s);
    dropped(subs, queue, filter);
    return true;
  }
  const wanted = new Map(resolved.triples.map((t) => [tripleKey(t), t]));
  const removed = [...s.startOffsets.keys()].filter((k) => !wanted.has(k));
  const added = [...wanted].filter(([k]) => !s.startOffsets.has(k)).map(([, t]) => t);
  for (const k of removed) {
    s.startOffsets.delete(k);
    subs.pool.release(k);
  }
  const fresh: SharedReader[] = [];
  for (const t of added) {
    const key = tripleKey(t);
    try {
      s.startOffsets.set(key, await subs.pool.reserve(t, fresh));
    } catch { /* this triple stays out; the next reload tries again */ }
    if (subs.registry.get(queue, filter) !== s) {
      // Gone during the await: its release did not see this reservation.
      if (s.startOffsets.delete(key)) subs.pool.release(key);
      break;
    }
  }
  subs.pool.start(fresh);
  return removed.length > 0 || added.length > 0;
}

/**
 * A wildcard subscription meets a triple it does not read yet (a target created after its
 * SUBSCRIBE, seen on this gateway's own append): it joins the triple's reader from
 * `fromOffset`, synchronously so the append that revealed it is routed. Bounded by
 * `max_triples_per_subscription`; needs the poll right. Returns whether it joined.
 */
export function joinAt(
  subs: Subscriptions,
  s: Subscription<ClientQueue>,
  triple: Triple,
  fromOffset: number,
): boolean {
  const key = tripleKey(triple);
  if (s.startOffsets.has(key) || subs.stopping()) return false;
  if (s.startOffsets.size >= subs.opts.maxTriplesPerSubscription) return false;
  if (!canPoll(s.client.sub.principal.permissions, triple.stream, triple.topic)) return false;
  subs.pool.reserveNow(triple, fromOffset);
  s.startOffsets.set(key, fromOffset);
  return true;
}

function dropped(subs: Subscriptions, queue: ClientQueue, filter: string): void {
  subs.logger.warn("Subscription dropped after reload", {
    client_id: queue.sub.clientId,
    topic: filter,
  });
}

/**
 * The copies one message makes (R3), shared by the router and the catch-ups: one target per
 * (client, topic prefix) among the subscriptions it matches, at the highest granted QoS of
 * those, so overlapping filters give one copy [MQTT-3.3.5-1]. For an MQTT 5 client the target
 * carries the subscription identifier of every matching subscription [MQTT-3.3.4-3], RETAIN
 * when one of them has Retain As Published, and No Local leaves out each subscription that
 * asked for it; its property block is made last, and a copy over the client's Maximum Packet
 * Size is dropped and counted [MQTT-3.1.2-25].
 *
 * @module
 */
import { publishSize } from "../codec/encoder.ts";
import { utf8Length } from "../base/utf8.ts";
import type { StoredMessage } from "../log/port.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { ClientQueue } from "./client_queue.ts";
import { isOwnMessage, OutboundProperties, retainOf } from "./out_v5.ts";
import type { PlainTarget, ShareGroup, Subscription } from "./registry.ts";

/** A copy to make: for one client, under one topic prefix. */
export interface Target {
  readonly client: ClientQueue;
  qos: 0 | 1 | 2;
  readonly prefix: string;
  /** MQTT 5: the identifiers of the matching subscriptions; null for a 3.1.1 client. */
  readonly ids: number[] | null;
  /** RETAIN of the copy (MQTT 5 Retain As Published). */
  retain: boolean;
  /** MQTT 5 property block, made by {@link finishTargets}; null for a 3.1.1 client. */
  props: Uint8Array | null;
  /** A shared subscription's copy: its group (a member's own copy is another target). */
  share?: ShareGroup<ClientQueue>;
}

/** The target of one matching subscription; null when No Local leaves it out. */
export function targetOf(s: Subscription<ClientQueue>, m: StoredMessage): Target | null {
  const q = s.client;
  if (q.sub.v5 == null) {
    return { client: q, qos: s.qos, prefix: s.prefix, ids: null, retain: false, props: null };
  }
  if (isOwnMessage(s, m, q.sub.clientId)) return null;
  const id = s.options?.subscriptionId ?? 0;
  const ids = id > 0 ? [id] : [];
  return { client: q, qos: s.qos, prefix: s.prefix, ids, retain: retainOf(s, m), props: null };
}

/**
 * The router's target of one matching subscription for a copy of `qos` (the message's QoS at
 * most): for a 3.1.1 client one made once per subscription and QoS, frozen and shared by every
 * message, since a fresh target per subscriber per message was the most of what a fan-out
 * allocated (`dedupe` copies one before merging into it; `finishTargets` finds nothing to
 * change in it); for an MQTT 5 client a fresh one, as {@link targetOf}.
 */
export function liveTargetOf(
  s: Subscription<ClientQueue>,
  m: StoredMessage,
  qos: 0 | 1 | 2,
): Target | null {
  if (s.client.sub.v5 != null) return targetOf(s, m);
  const copyQos = s.qos < qos ? s.qos : qos;
  const made = (s.plainTargets ??= [])[copyQos];
  if (made !== undefined) return made;
  const t: Target = Object.freeze({
    client: s.client,
    qos: copyQos,
    prefix: s.prefix,
    ids: null,
    retain: false,
    props: null,
  });
  s.plainTargets[copyQos] = t as PlainTarget<ClientQueue>;
  return t;
}

/** One target per (client, prefix): the highest QoS, every identifier, RETAIN if any. */
export function dedupe(targets: Target[]): Target[] {
  const seen = new Map<ClientQueue, number[]>(); // each client's places in `out`
  const out: Target[] = [];
  for (const t of targets) {
    const places = seen.get(t.client);
    const at = places?.find((i) => out[i].prefix === t.prefix && out[i].share === t.share);
    if (at !== undefined) {
      // A shared plain target (`liveTargetOf`) is merged into a copy, never into itself.
      if (Object.isFrozen(out[at])) out[at] = { ...out[at] };
      merge(out[at], t);
      continue;
    }
    if (places) places.push(out.length);
    else seen.set(t.client, [out.length]);
    out.push(t);
  }
  return out;
}

function merge(into: Target, t: Target): void {
  if (t.qos > into.qos) into.qos = t.qos;
  if (t.retain) into.retain = true;
  if (into.ids === null || t.ids === null) return;
  for (const id of t.ids) if (!into.ids.includes(id)) into.ids.push(id);
}

/**
 * Clamps every target to the message's QoS and gives MQTT 5 targets their property block
 * (`left`: the expiry seconds left, or null); drops, in place, the v5 copies over the client's
 * Maximum Packet Size. Returns `targets`.
 */
export function finishTargets(
  targets: Target[],
  m: StoredMessage,
  view: { readonly topic: string; readonly qos: 0 | 1 | 2; readonly payload: Uint8Array },
  left: number | null,
  metrics: GatewayMetrics,
): Target[] {
  let v5: OutboundProperties | null = null;
  let kept = 0;
  for (const t of targets) {
    if (t.qos > view.qos) t.qos = view.qos;
    const sub5 = t.client.sub.v5;
    if (sub5 != null && t.ids !== null) {
      t.props = (v5 ??= new OutboundProperties(m, left)).for(t.ids);
      const topicBytes = utf8Length(t.prefix) + utf8Length(view.topic);
      const size = publishSize(topicBytes, view.payload.length, t.qos, t.props);
      if (size > sub5.maximumPacketSize) {
        metrics.droppedTooLarge.inc();
        continue;
      }
    }
    targets[kept++] = t;
  }
  targets.length = kept;
  return targets;
}

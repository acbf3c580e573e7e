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
import type { ShareGroup, Subscription } from "./registry.ts";

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

/** One target per (client, prefix): the highest QoS, every identifier, RETAIN if any. */
export function dedupe(targets: Target[]): Target[] {
  const seen = new Map<ClientQueue, Target[]>();
  const out: Target[] = [];
  for (const t of targets) {
    const same = seen.get(t.client)?.find((x) => x.prefix === t.prefix && x.share === t.share);
    if (same !== undefined) {
      merge(same, t);
      continue;
    }
    const list = seen.get(t.client);
    if (list) list.push(t);
    else seen.set(t.client, [t]);
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

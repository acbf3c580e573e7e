/**
 * Retained messages at SUBSCRIBE [MQTT-3.3.1-9]: a new subscription (MQTT 5: as its Retain
 * Handling says [MQTT-3.3.1-9..11]) gets every retained message its filter matches, flagged
 * RETAIN [MQTT-3.3.1-8], at min(QoS published, QoS granted), after the SUBACK. Receiving one
 * needs the poll right on the target its topic maps to now, as for a live message; No Local,
 * subscription identifiers, Maximum Packet Size and the Message Expiry left apply as to live
 * copies (`targets.ts`). A replay (`$replay/…`, `iggy-from`) and a resumed stored session get
 * none. The copies hold no shared reader's ledger entry: each SUBSCRIBE's copies get a ledger of
 * their own, so an unacknowledged retained copy holds back no stored position.
 *
 * A retained set is paced by the client's socket (`pacing.ts`): its copies are queued as the
 * queue has room, after the SUBACK, so a set of any size reaches a client that reads, QoS 0
 * copies included, and a client that stops reading is evicted after `slow_consumer_timeout_ms`.
 * It stops when the subscription ends or is made again (a new SUBSCRIBE starts a new set).
 *
 * @module
 */
import type { SpanContext } from "@opentelemetry/api";
import { canPoll } from "../access/permissions.ts";
import { openEnvelope } from "../stored/envelope.ts";
import type { RetainedStore } from "../stored/retained/retained_store.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { SubscribeRequest } from "../session/delivery_port.ts";
import type { PublishPreparer } from "../session/publish.ts";
import type { ClientQueue } from "./client_queue.ts";
import { AckLedger } from "./ledger.ts";
import { expiryLeft } from "./out_v5.ts";
import type { Subscription } from "./registry.ts";
import { deliverCopies } from "./route.ts";
import { finishTargets, targetOf } from "./targets.ts";
import { copiesBytes, roomFor } from "./pacing.ts";

/** The key retained copies carry instead of a triple's (no stored position is kept for it). */
const RETAINED_KEY = "";

/** What sending retained messages needs. */
export interface RetainedOutDeps {
  readonly retained: RetainedStore;
  readonly preparer: PublishPreparer;
  readonly metrics: GatewayMetrics;
  readonly evict: (q: ClientQueue, reason: string) => void;
}

/**
 * Whether a SUBSCRIBE's filter gets the retained messages: not a replay; MQTT 5 Retain Handling
 * 0 always, 1 only when the subscription is new, 2 never.
 */
export function wantsRetained(f: SubscribeRequest, existed: boolean): boolean {
  if (f.from !== undefined && f.from.kind !== "latest") return false;
  if (f.filter.startsWith("$replay/")) return false;
  if (f.filter.startsWith("$share/")) return false; // not to shared subscriptions [MQTT-3.8.4]
  const handling = f.options?.retainHandling ?? 0;
  return handling === 0 || (handling === 1 && !existed);
}

/**
 * Sends `s` the retained messages its filter matches, paced by its queue, while `current()`
 * holds (the subscription still stands and this set was not superseded); how many copies
 * were made.
 */
export async function sendRetained(
  deps: RetainedOutDeps,
  s: Subscription<ClientQueue>,
  current: () => boolean,
): Promise<number> {
  const q = s.client;
  const principal = q.sub.principal;
  const ledger = new AckLedger(-1);
  const reader = { ledger, key: RETAINED_KEY };
  const served = new Set<SpanContext>();
  let sent = 0;
  let at = 0;
  try {
    for (const m of deps.retained.matching(s.match)) {
      const view = openEnvelope(m);
      if (view === null) continue;
      if (!deps.preparer.hasTarget(view.topic)) continue;
      const r = deps.preparer.resolve(view.topic); // cached by hasTarget()
      if (!canPoll(principal.permissions, r.stream, r.topic)) continue;
      const t = targetOf(s, m);
      if (t === null) continue; // No Local
      t.retain = true;
      const targets = finishTargets([t], m, view, expiryLeft(m), deps.metrics);
      if (targets.length === 0) continue;
      const bytes = copiesBytes(targets, view);
      if (q.blockedBy(bytes) !== null && !await roomFor(q, bytes)) break;
      if (q.closed || !current()) break;
      const entry = ledger.record(at++, targets[0].qos > 0 ? 1 : 0);
      deliverCopies(targets, view, reader, entry, served, deps.metrics, deps.evict);
      sent++;
    }
  } finally {
    if (sent > 0) deps.metrics.retainedDelivered.inc({}, sent);
  }
  return sent;
}

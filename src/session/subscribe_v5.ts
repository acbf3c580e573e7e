/**
 * MQTT 5 SUBSCRIBE and UNSUBSCRIBE: a reason code per filter instead of
 * 3.1.1's bare 0x80. The refusals the session can tell apart are decided here, before the
 * delivery is asked: 0x87 `$SYS`, 0x83 a malformed `iggy-from`, 0x97 quota exceeded past
 * `limits.max_subscriptions_per_client`. UNSUBACK: 0x11 when no subscription existed.
 *
 * The subscription options (No Local, Retain As Published, identifier) travel with each filter
 * into the delivery, which keeps them with the subscription. A SUBSCRIBE user property
 * `iggy-from` = `earliest | latest | time:<RFC 3339 or epoch ms>` starts its filters in the
 * log's past, as a 3.1.1 `$replay/<from>/` prefix does (malformed: 0x83). The delivery resolves
 * wildcard filters and gives its own refusals their v5 codes (0x87, 0x8F, 0x97).
 *
 * @module
 */
import type { Subscription } from "../codec/packets.ts";
import type { SessionContext } from "./context.ts";
import type { Subscriber, SubscribeRequest } from "./delivery_port.ts";
import { parseReplayFrom, type ReplayFrom } from "./replay_from.ts";
import type { SubackOutcome, UnsubackOutcome } from "./outcome.ts";

/** The services SUBSCRIBE and UNSUBSCRIBE use. */
export type SubscribeContext = Pick<SessionContext, "config" | "delivery" | "logger">;

/** SUBACK / UNSUBACK reason codes [MQTT-3.9.3, 3.11.3]. */
export const Suback5 = {
  UNSPECIFIED_ERROR: 0x80,
  NOT_AUTHORIZED: 0x87,
  QUOTA_EXCEEDED: 0x97,
  NO_SUBSCRIPTION_EXISTED: 0x11,
  IMPLEMENTATION_SPECIFIC_ERROR: 0x83,
} as const;

/** The SUBSCRIBE user property that starts its subscriptions in the log's past. */
export const IGGY_FROM = "iggy-from";

/**
 * Where the filters of a SUBSCRIBE start: its `iggy-from` user property parsed (the last one
 * wins), undefined without one (live), null when it is malformed.
 */
export function replayFromOf(f: Subscription): ReplayFrom | undefined | null {
  let text: string | undefined;
  for (const [k, v] of f.options?.userProperties ?? []) if (k === IGGY_FROM) text = v;
  return text === undefined ? undefined : parseReplayFrom(text);
}

/** The reason code that refuses `f` before the delivery is asked, or null. */
function precheck(f: Subscription): number | null {
  if (f.filter.startsWith("$SYS")) return Suback5.NOT_AUTHORIZED;
  if (replayFromOf(f) === null) return Suback5.IMPLEMENTATION_SPECIFIC_ERROR;
  return null;
}

/** 0x97 for each new filter past `limits.max_subscriptions_per_client` (replacements count not). */
function quota(
  ctx: SubscribeContext,
  sub: Subscriber,
  subscriptions: readonly Subscription[],
  codes: number[],
): void {
  const held = ctx.delivery.subscriptionsOf(sub);
  const max = ctx.config.limits.max_subscriptions_per_client;
  let count = held.count;
  const added = new Set<string>();
  for (const [i, f] of subscriptions.entries()) {
    if (codes[i] >= 0 || held.has(f.filter) || added.has(f.filter)) continue;
    if (count >= max) codes[i] = Suback5.QUOTA_EXCEEDED;
    else {
      count++;
      added.add(f.filter);
    }
  }
}

/** S1–S5 for an MQTT 5 SUBSCRIBE; the SUBACK with one reason code per filter. */
export async function handleSubscribe5(
  ctx: SubscribeContext,
  sub: Subscriber,
  packetId: number,
  subscriptions: readonly Subscription[],
): Promise<SubackOutcome> {
  const codes: number[] = subscriptions.map((f) => precheck(f) ?? -1);
  quota(ctx, sub, subscriptions, codes);
  const asked: SubscribeRequest[] = [];
  for (const [i, f] of subscriptions.entries()) {
    if (codes[i] >= 0) continue;
    const from = replayFromOf(f);
    asked.push(from === undefined || from === null ? f : { ...f, from });
  }
  const granted = asked.length > 0 ? await ctx.delivery.subscribe(sub, asked) : [];
  let next = 0;
  for (let i = 0; i < codes.length; i++) if (codes[i] < 0) codes[i] = granted[next++];
  const unspecified = ctx.config.mqtt5.subscribe_refusal === "unspecified";
  for (const [i, f] of subscriptions.entries()) {
    if (codes[i] >= 0x80) {
      ctx.logger.limited("info", "Subscription refused", {
        client_id: sub.clientId,
        filter: f.filter,
        reason_code: codes[i],
      });
      if (unspecified) codes[i] = Suback5.UNSPECIFIED_ERROR;
    }
  }
  return { kind: "suback", packetId, codes, after: () => ctx.delivery.afterSuback(sub) };
}

/** UNSUBSCRIBE of an MQTT 5 client: 0 per removed subscription, 0x11 when none existed. */
export function handleUnsubscribe5(
  ctx: SubscribeContext,
  sub: Subscriber,
  packetId: number,
  filters: readonly string[],
): UnsubackOutcome {
  const existed = ctx.delivery.unsubscribe(sub, filters);
  const codes = filters.map((_, i) => existed[i] ? 0 : Suback5.NO_SUBSCRIPTION_EXISTED);
  return { kind: "unsuback", packetId, codes };
}

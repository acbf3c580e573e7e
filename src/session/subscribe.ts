/**
 * SUBSCRIBE and UNSUBSCRIBE (S1–S5 in delivery): the session asks the delivery port
 * and answers with an outcome; the connection encodes and sends it.
 *
 * @module
 */
import type { ClientPacket } from "../codec/packets.ts";
import type { SubscribeContext } from "./subscribe_v5.ts";
import type { SessionContext } from "./context.ts";
import type { Subscriber } from "./delivery_port.ts";
import type { SubackOutcome, UnsubackOutcome } from "./outcome.ts";
import { handleSubscribe5, handleUnsubscribe5 } from "./subscribe_v5.ts";

/** A decoded SUBSCRIBE. */
export type SubscribePacket = Extract<ClientPacket, { type: "subscribe" }>;
/** A decoded UNSUBSCRIBE. */
export type UnsubscribePacket = Extract<ClientPacket, { type: "unsubscribe" }>;

/**
 * S1–S5 for every filter; resolves with the SUBACK to send (one return code per filter). A
 * stored session's SUBACK waits until its record, holding the new filters, is stored (on the
 * embedded log: fsynced): a power cut after the SUBACK must not bring the session back without
 * them, when its client would not know to subscribe again.
 */
export async function handleSubscribe(
  ctx: SubscribeContext & Pick<SessionContext, "sessions">,
  sub: Subscriber,
  p: SubscribePacket,
): Promise<SubackOutcome> {
  const suback = await subscribeAll(ctx, sub, p);
  if (sub.session !== null) await ctx.sessions.records.written();
  return suback;
}

async function subscribeAll(
  ctx: SubscribeContext,
  sub: Subscriber,
  p: SubscribePacket,
): Promise<SubackOutcome> {
  // MQTT 5 (its filters carry options): reason codes per filter, in subscribe_v5.ts.
  if (p.subscriptions[0]?.options !== undefined) {
    return await handleSubscribe5(ctx, sub, p.packetId, p.subscriptions);
  }
  const codes = await ctx.delivery.subscribe(sub, p.subscriptions);
  const after = () => ctx.delivery.afterSuback(sub);
  return { kind: "suback", packetId: p.packetId, codes, after };
}

/** Removes the client's subscriptions to the filters; the UNSUBACK to send. */
export function handleUnsubscribe(
  ctx: SubscribeContext,
  sub: Subscriber,
  p: UnsubscribePacket,
  v5 = false,
): UnsubackOutcome {
  if (v5) return handleUnsubscribe5(ctx, sub, p.packetId, p.filters);
  ctx.delivery.unsubscribe(sub, p.filters);
  return { kind: "unsuback", packetId: p.packetId };
}

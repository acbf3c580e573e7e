/**
 * SUBSCRIBE and UNSUBSCRIBE (DESIGN §4, S1–S5 in delivery): the session asks the delivery port
 * and answers with an outcome; the connection encodes and sends it.
 *
 * @module
 */
import type { ClientPacket } from "../codec/packets.ts";
import type { SessionContext } from "./context.ts";
import type { Subscriber } from "./delivery_port.ts";
import type { SubackOutcome, UnsubackOutcome } from "./outcome.ts";

/** A decoded SUBSCRIBE. */
export type SubscribePacket = Extract<ClientPacket, { type: "subscribe" }>;
/** A decoded UNSUBSCRIBE. */
export type UnsubscribePacket = Extract<ClientPacket, { type: "unsubscribe" }>;

/** S1–S5 for every filter; resolves with the SUBACK to send (one return code per filter). */
export async function handleSubscribe(
  ctx: SessionContext,
  sub: Subscriber,
  p: SubscribePacket,
): Promise<SubackOutcome> {
  const codes = await ctx.delivery.subscribe(sub, p.subscriptions);
  return { kind: "suback", packetId: p.packetId, codes };
}

/** Removes the client's subscriptions to the filters; the UNSUBACK to send. */
export function handleUnsubscribe(
  ctx: SessionContext,
  sub: Subscriber,
  p: UnsubscribePacket,
): UnsubackOutcome {
  ctx.delivery.unsubscribe(sub, p.filters);
  return { kind: "unsuback", packetId: p.packetId };
}

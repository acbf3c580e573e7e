/**
 * Wills (DESIGN §2): checked at CONNECT, held in memory per connection, and published through
 * the same produce path as a PUBLISH (P2–P7: map, ACL, envelope, partition, append, outcome
 * counted) when the connection ends without DISCONNECT [MQTT-3.1.2-8]. Never after a clean
 * DISCONNECT [MQTT-3.1.2-10].
 *
 * A will has no packet id and no PUBACK; whatever its QoS, a confirmed append counts as
 * `appended`. Live subscribers of its topic get it like any message.
 *
 * @module
 */
import type { Will } from "../codec/packets.ts";
import { checkResolution } from "../mapping/mod.ts";
import { canSend } from "../access/permissions.ts";
import type { Principal } from "../log/port.ts";
import type { LogBackend } from "../log/port.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { Logger } from "../observe/logger.ts";
import type { AppendBudget } from "./append_budget.ts";
import type { DeliveryPort } from "./delivery_port.ts";
import { placedAt, type PublishPreparer } from "./publish.ts";

/**
 * The shared services a will uses: a part of `SessionContext` (context.ts), named here so that
 * the context, which holds the {@link WillPublisher}, and this file do not import each other.
 */
export interface WillContext {
  readonly preparer: PublishPreparer;
  readonly backend: LogBackend;
  readonly delivery: DeliveryPort;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  readonly appendBudget: AppendBudget;
}

/** A will accepted at CONNECT (QoS 2 wills are refused before this). */
export interface HeldWill {
  readonly topic: string;
  readonly payload: Uint8Array;
  readonly qos: 0 | 1;
  readonly retain: boolean;
}

/**
 * The CONNECT-time check: the topic maps to a valid target the principal may send to.
 * Returns the refusal reason, or null when the will is accepted. Makes no backend call.
 */
export function refuseWill(ctx: WillContext, will: Will, principal: Principal): string | null {
  if (will.qos === 2) return "QoS 2 wills are not supported";
  if (will.topic.startsWith("$SYS")) return `will topic "${will.topic}" is reserved ($SYS)`;
  const r = ctx.preparer.resolve(will.topic);
  const invalid = checkResolution(r);
  if (invalid !== null) return `will topic: ${invalid}`;
  if (!canSend(principal.permissions, r.stream, r.topic)) {
    return `user "${principal.username}" may not send the will to ${r.stream}/${r.topic}`;
  }
  return null;
}

/** Wills being appended, so a graceful stop can wait for them before closing the log. */
export class WillPublisher {
  #pending = new Set<Promise<void>>();

  get pending(): number {
    return this.#pending.size;
  }

  /** Publishes `will` of `clientId` now. Never throws; the outcome is counted and logged. */
  publish(ctx: WillContext, will: HeldWill, principal: Principal, clientId: string): void {
    const p = publishWill(ctx, will, principal, clientId).finally(() => this.#pending.delete(p));
    this.#pending.add(p);
  }

  /** Resolves once every will published so far has settled. */
  async idle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
  }
}

async function publishWill(
  ctx: WillContext,
  will: HeldWill,
  principal: Principal,
  clientId: string,
): Promise<void> {
  const log = (outcome: string, reason: unknown) =>
    ctx.logger.limited(outcome === "failed" ? "error" : "warn", `Will ${outcome}`, {
      client_id: clientId,
      topic: will.topic,
      reason: String((reason as Error)?.message ?? reason),
    });
  let prepared;
  try {
    // P2–P6 again: the map, the users or the target may have changed since CONNECT.
    prepared = await ctx.preparer.prepare(
      { ...will, type: "publish", dup: false, packetId: 0 },
      principal,
      clientId,
      true,
    );
  } catch (err) {
    prepared = { kind: "failed" as const, reason: String(err) };
  }
  if (prepared.kind !== "append") {
    ctx.metrics.outcome[prepared.kind].inc();
    return log(prepared.kind, prepared.reason);
  }
  ctx.metrics.ruleHit(prepared.rule).inc();
  const { address, message } = prepared;
  const messages = [message];
  let offered = false;
  ctx.appendBudget.add(1);
  try {
    const receipt = await ctx.backend.append({
      ...address,
      messages,
      onCommitted: (baseOffset) => {
        offered = true;
        ctx.delivery.notifyAppended(address, baseOffset, messages);
      },
    });
    ctx.metrics.outcome.appended.inc();
    if (!offered) {
      ctx.delivery.notifyAppended(
        placedAt(address, receipt.partition),
        receipt.baseOffset,
        messages,
      );
    }
  } catch (err) {
    ctx.metrics.outcome.failed.inc();
    log("failed", err);
  } finally {
    ctx.appendBudget.release(1);
  }
}

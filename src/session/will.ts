/**
 * Wills: checked at CONNECT, held in memory per connection, and published through
 * the same produce path as a PUBLISH (P2–P7: map, ACL, envelope, partition, append, outcome
 * counted) when the connection ends without DISCONNECT [MQTT-3.1.2-8]. Never after a clean
 * DISCONNECT [MQTT-3.1.2-10].
 *
 * A will has no packet id and no PUBACK; whatever its QoS, a confirmed append counts as
 * `appended`. Live subscribers of its topic get it like any message. Its trace is a PUBLISH's
 * (`publish_trace.ts`): a `traceparent` user property is the parent of its publish span.
 *
 * @module
 */
import type { Will, WillProperties } from "../codec/packets.ts";
import { checkResolution } from "../mapping/mod.ts";
import { canSend } from "../access/permissions.ts";
import type { Principal } from "../log/port.ts";
import type { LogBackend } from "../log/port.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { Logger } from "../observe/logger.ts";
import type { AppendBudget } from "./append_budget.ts";
import type { DeliveryPort } from "./delivery_port.ts";
import type { PreparedAppend, PublishPreparer } from "./publish.ts";
import type { Span } from "@opentelemetry/api";
import { startAppendSpan } from "../observe/tracing.ts";
import { SPAN_STATUS_ERROR } from "../observe/otel.ts";
import { endRefusedSpan, traceOf } from "./publish_trace.ts";
import { appendAndOffer } from "./appender.ts";
import { keepRetained } from "./publish_retained.ts";
import type { RetainedStore } from "../stored/retained/retained_store.ts";

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
  readonly retained?: RetainedStore;
}

/** A will accepted at CONNECT. */
export interface HeldWill {
  readonly topic: string;
  readonly payload: Uint8Array;
  readonly qos: 0 | 1 | 2;
  readonly retain: boolean;
  /** MQTT 5 will properties (stored with the message like a PUBLISH's; will delay). */
  readonly properties?: WillProperties;
}

/**
 * How long after the connection ended the will goes out (ms): the MQTT 5 Will Delay Interval,
 * but no later than the session ends [MQTT-3.1.3-9] and at most `mqtt5.max_will_delay_s`.
 * While sessions end with the connection (session expiry 0), that is at once.
 */
export function willDelayMs(
  will: HeldWill,
  sessionExpiry: number | undefined,
  maxSeconds: number,
): number {
  const asked = will.properties?.willDelay ?? 0;
  return Math.min(asked, sessionExpiry ?? 0, maxSeconds) * 1000;
}

/** Publishes the will of a connection ended without DISCONNECT, after {@link willDelayMs}. */
export function publishOnClose(
  ctx: WillContext & {
    readonly wills: WillPublisher;
    readonly config: { readonly mqtt5: { readonly max_will_delay_s: number } };
  },
  will: HeldWill,
  principal: Principal,
  clientId: string,
  sessionExpiry: number | undefined,
): void {
  const delay = willDelayMs(will, sessionExpiry, ctx.config.mqtt5.max_will_delay_s);
  ctx.wills.publish(ctx, will, principal, clientId, delay);
}

/**
 * The CONNECT-time check: the topic maps to a valid target the principal may send to.
 * Returns the refusal reason, or null when the will is accepted. Makes no backend call.
 */
export function refuseWill(
  ctx: Pick<WillContext, "preparer">,
  will: Will,
  principal: Principal,
): string | null {
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
  /** Delayed wills by client id (at most one per client id: one per ended connection). */
  #delayed = new Map<string, { timer: ReturnType<typeof setTimeout>; publish: () => void }>();

  get pending(): number {
    return this.#pending.size;
  }

  /** Wills waiting for their delay. */
  get delayed(): number {
    return this.#delayed.size;
  }

  /**
   * Publishes `will` of `clientId` now, or after `delayMs` (MQTT 5 will delay) unless a new
   * connection with the same client id comes first ({@link cancel}). Never throws; the outcome
   * is counted and logged.
   */
  publish(
    ctx: WillContext,
    will: HeldWill,
    principal: Principal,
    clientId: string,
    delayMs = 0,
  ): void {
    const now = () => {
      const p = publishWill(ctx, will, principal, clientId).finally(() => this.#pending.delete(p));
      this.#pending.add(p);
    };
    if (delayMs <= 0) return now();
    this.cancel(clientId);
    const publish = () => {
      this.#delayed.delete(clientId);
      now();
    };
    this.#delayed.set(clientId, { timer: setTimeout(publish, delayMs), publish });
  }

  /** A new connection with `clientId` arrived before its will's delay passed: not sent. */
  cancel(clientId: string): void {
    const d = this.#delayed.get(clientId);
    if (d === undefined) return;
    clearTimeout(d.timer);
    this.#delayed.delete(clientId);
  }

  /**
   * A connection with `clientId` was established: a delayed will of its session is not sent
   * (back before the delay passed [MQTT-3.1.3-9]), unless Clean Start 1 ended that session,
   * which is the other end of the delay: then it goes out now.
   */
  reconnected(clientId: string, cleanStart: boolean): void {
    const d = this.#delayed.get(clientId);
    if (d === undefined) return;
    clearTimeout(d.timer);
    if (cleanStart) d.publish();
    else this.#delayed.delete(clientId);
  }

  /**
   * Resolves once every will published so far has settled. Delayed wills go out now: they are
   * held in memory only and would be lost with the process, although a stored session they
   * belong to survives the restart (a device back right after it has had its will published;
   * OPERATIONS "Server DISCONNECT" says so).
   */
  async idle(): Promise<void> {
    for (const d of [...this.#delayed.values()]) {
      clearTimeout(d.timer);
      d.publish();
    }
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
  const p = { ...will, type: "publish", dup: false, packetId: 0 } as const;
  // A PUBLISH's trace, the will's too: its `traceparent` is the parent of a publish span (its
  // connection has ended: no link to it) and stored under its W3C name.
  const site = { metrics: ctx.metrics, logger: ctx.logger, clientId, spanContext: null };
  const trace = traceOf(p, site);
  const span = trace?.span ?? null;
  let prepared;
  try {
    // P2–P6 again: the map, the users or the target may have changed since CONNECT.
    prepared = await ctx.preparer.prepare(p, principal, clientId, true, trace?.stored);
  } catch (err) {
    prepared = { kind: "failed" as const, reason: String(err) };
  }
  if (prepared.kind !== "append") {
    if (span !== null) endRefusedSpan(span, prepared.kind, prepared.reason);
    ctx.metrics.outcome[prepared.kind].inc();
    return log(prepared.kind, prepared.reason);
  }
  ctx.metrics.ruleHit(prepared.rule).inc();
  if (will.retain && ctx.retained !== undefined) {
    // A retained will sets its topic's retained message [MQTT-3.1.2-17]; over a bound it is
    // appended, not retained (there is no PUBACK to refuse it with).
    const deps = { retained: ctx.retained, metrics: ctx.metrics, logger: ctx.logger };
    const kept = await keepRetained(deps, p, prepared, false, clientId, { refusalLogged: false });
    if (kept.kind !== "append") {
      if (span !== null) endRefusedSpan(span, kept.kind, kept.reason);
      ctx.metrics.outcome[kept.kind].inc();
      return log(kept.kind, kept.reason);
    }
  }
  await appendWill(ctx, prepared.address, prepared.message, span, log);
}

/** P7 for a will: the append (with its span, the child of the will's publish span) and offer. */
async function appendWill(
  ctx: WillContext,
  address: PreparedAppend["address"],
  message: PreparedAppend["message"],
  span: Span | null,
  log: (outcome: string, reason: unknown) => void,
): Promise<void> {
  const { stream, topic, partition } = address;
  const appendSpan = startAppendSpan(null, stream, topic, partition, 1, span && [span]);
  ctx.appendBudget.add(1);
  try {
    await appendAndOffer(ctx, { address, messages: [message] });
    ctx.metrics.outcome.appended.inc();
  } catch (err) {
    ctx.metrics.outcome.failed.inc();
    const status = { code: SPAN_STATUS_ERROR, message: String((err as Error)?.message ?? err) };
    appendSpan.setStatus(status);
    span?.setStatus(status);
    log("failed", err);
  } finally {
    ctx.appendBudget.release(1);
    appendSpan.end();
    span?.end();
  }
}

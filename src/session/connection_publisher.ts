/**
 * One connection's way in, read top to bottom for one PUBLISH:
 *
 * - P1 validate: done by the decoder before the packet gets here.
 * - What refuses it before it is prepared: a QoS 2 resend of an id already appended (its
 *   PUBREC again), the MQTT 5 Receive Maximum, content an MQTT 5 PUBLISH cannot be stored with.
 * - P2 match, P3 resolve, P4 permit, P5 partition, P6 envelope: `PublishPreparer.prepare`
 *   (`publish.ts`); a RETAIN PUBLISH then changes the retained store (`publish_retained.ts`).
 * - P7 append: the prepared message goes to the connection's {@link Appender} (`appender.ts`),
 *   which appends it with the rest of the read for its partition, offers it to subscribers and
 *   writes its PUBACK (or PUBREC) into the outbox in arrival order. A refused one goes there
 *   too, to be answered in its turn; its reason code is decided in `publish_acks.ts`.
 * - QoS 2 [MQTT-4.3.3]: appended like QoS 1 and answered with a PUBREC; its packet id is held
 *   from the confirmed append to the PUBREL (`release`, `qos2_in.ts`), so a PUBLISH that comes
 *   again under it (DUP) gets its PUBREC again without a second append.
 *
 * Made on a connection's first PUBLISH: a connection that only connected, or only subscribes,
 * holds none of this. The fast path allocates no outcome object per message.
 *
 * @module
 */
import type { Span } from "@opentelemetry/api";
import { AckType } from "../codec/encoder.ts";
import type { PublishPacket } from "../codec/packets.ts";
import type { Principal } from "../log/port.ts";
import { type AppendContext, Appender, type AppendSite } from "./appender.ts";
import type { SessionContext } from "./context.ts";
import type { Denied, Failed, Prepared } from "./publish.ts";
import { type ContentProblem, refuseContent5 } from "./publish_v5.ts";
import {
  contentDisconnectCode,
  contentPuback,
  RECEIVE_MAXIMUM_EXCEEDED,
  refusalPuback,
  unknownPubcomp,
} from "./publish_acks.ts";
import { keepRetained, type RetainedNotes } from "./publish_retained.ts";
import { endRefusedSpan, traceOf, type TraceSite } from "./publish_trace.ts";

/** The services the way in uses. */
export type PublishContext = AppendContext & Pick<SessionContext, "retained">;

/** What the publisher needs of its connection. */
export interface PublishSite extends AppendSite {
  /** Closes, telling an MQTT 5 client why. */
  disconnect(reasonCode: number, reason: string): void;
}

/**
 * The PUBLISH pipeline of one connected client. It is its own {@link TraceSite} and
 * {@link RetainedNotes}: no objects of their own per connection (memory per idle connection is a
 * benchmark floor).
 */
export class ConnectionPublisher implements TraceSite, RetainedNotes {
  readonly #ctx: PublishContext;
  readonly #site: PublishSite;
  readonly #principal: Principal;
  readonly #clientId: string;
  readonly #appender: Appender;
  /** A refused retained set was logged for this connection (`publish_retained.ts`). */
  refusalLogged = false;

  constructor(ctx: PublishContext, site: PublishSite, principal: Principal, clientId: string) {
    this.#ctx = ctx;
    this.#site = site;
    this.#principal = principal;
    this.#clientId = clientId;
    this.#appender = new Appender(ctx, site);
  }

  get metrics(): PublishContext["metrics"] {
    return this.#ctx.metrics;
  }

  get logger(): PublishContext["logger"] {
    return this.#ctx.logger;
  }

  get clientId(): string {
    return this.#clientId;
  }

  get spanContext(): PublishSite["spanContext"] {
    return this.#site.spanContext;
  }

  /** Messages waiting for the backend. */
  get inflight(): number {
    return this.#appender.inflight;
  }

  /**
   * P1–P7 for one PUBLISH. Returns a promise only when the next packet must wait: the target's
   * metadata is not cached (this connection only waits, so per-partition order holds).
   */
  publish(p: PublishPacket): Promise<void> | undefined {
    if (p.qos === 2) {
      const seen = this.#appender.qos2.arrived(p.packetId);
      // Sent again before its PUBREL: in the log already (its PUBREC again), or on its way.
      if (seen === "appended") this.#appender.acknowledgeAgain(p.packetId);
      if (seen !== "new") return undefined;
    }
    if (p.qos > 0 && this.#site.v5 !== null && this.#pastReceiveMaximum()) {
      return this.#receiveMaximumExceeded();
    }
    if (p.properties !== undefined) {
      const problem = refuseContent5(p);
      if (problem !== null) return this.#refuseContent(p, problem);
    }
    const trace = traceOf(p, this);
    const prepared = this.#ctx.preparer.prepare(
      p,
      this.#principal,
      this.#clientId,
      false,
      trace?.stored,
    );
    const span = trace?.span ?? null;
    if (p.retain && this.#ctx.retained !== undefined) return this.#retained(p, prepared, span);
    if (prepared instanceof Promise) {
      this.flush();
      return prepared.then((r) => this.#take(p, r, span));
    }
    this.#take(p, prepared, span);
    return undefined;
  }

  /**
   * RETAIN (`publish_retained.ts`): what came before is appended first; the retained store is
   * changed, then the message is appended (the next packet waits: retained sets are rare).
   */
  async #retained(
    p: PublishPacket,
    pending: Prepared | Promise<Prepared>,
    span: Span | null,
  ): Promise<void> {
    this.flush();
    const ctx = this.#ctx;
    const r = await this.#appender.holding((async () => {
      const r = await pending;
      if (r.kind !== "append" || ctx.retained === undefined) return r;
      const deps = { retained: ctx.retained, metrics: ctx.metrics, logger: ctx.logger };
      const v5 = this.#site.v5 !== null;
      return await keepRetained(deps, p, r, v5, this.#clientId, this);
    })());
    this.#take(p, r, span);
    this.flush();
  }

  /**
   * MQTT 5: the client has as many QoS 1 and 2 PUBLISHes unanswered (no PUBACK, or no PUBCOMP)
   * as the Receive Maximum our CONNACK gave it, and sent one more [MQTT-3.3.4-9].
   */
  #pastReceiveMaximum(): boolean {
    const max = Math.min(65_535, this.#ctx.config.limits.max_inflight_publishes_per_client);
    return this.#appender.unanswered >= max;
  }

  /** DISCONNECT 0x93 Receive Maximum exceeded, after what came before is appended. */
  #receiveMaximumExceeded(): undefined {
    const reason = "more QoS 1/2 PUBLISHes unanswered than the Receive Maximum";
    this.#ctx.metrics.outcome.rejected.inc();
    this.#ctx.logger.limited("warn", "Publish rejected", { client_id: this.#clientId, reason });
    this.flush();
    this.#site.disconnect(RECEIVE_MAXIMUM_EXCEEDED, reason);
    return undefined;
  }

  /**
   * P7 begins: a prepared message goes to the appender (with its publish span, ended at the
   * append's answer), a refused one is answered.
   */
  #take(p: PublishPacket, r: Prepared, span: Span | null): void {
    if (r.kind !== "append") {
      if (span !== null) endRefusedSpan(span, r.kind, r.reason);
      return this.#refuse(p, r);
    }
    this.#ctx.metrics.ruleHit(r.rule).inc();
    this.#appender.add(p, r, span);
  }

  /**
   * `denied` or `failed` before the append: counted, logged, no PUBACK [MQTT-3.3.5-2]; MQTT 5
   * gets a PUBACK with the reason code instead, and the connection stays open.
   */
  #refuse(p: PublishPacket, r: Denied | Failed): void {
    const ctx = this.#ctx;
    ctx.metrics.outcome[r.kind].inc();
    ctx.logger.limited("warn", `Publish ${r.kind}`, {
      client_id: this.#clientId,
      reason: r.reason,
    });
    const v5 = this.#site.v5;
    const puback = v5 == null || p.qos === 0 ? null : refusalPuback(v5, p.packetId, r);
    this.#appender.notAppended(p, puback);
  }

  /** MQTT 5: refused for its content (`rejected`): PUBACK 0x99 (QoS 1 and 2) or DISCONNECT. */
  #refuseContent(p: PublishPacket, problem: ContentProblem): undefined {
    const ctx = this.#ctx;
    const reason = problem.reason;
    ctx.metrics.outcome.rejected.inc();
    ctx.logger.limited("warn", "Publish rejected", { client_id: this.#clientId, reason });
    const v5 = this.#site.v5;
    if (p.qos === 0 || v5 == null) {
      this.flush(); // what came before it is appended
      this.#site.disconnect(contentDisconnectCode(problem), reason);
      return;
    }
    this.#appender.notAppended(p, contentPuback(v5, p.packetId, problem));
  }

  /** The end of a read: one append per partition for everything it produced. */
  flush(): void {
    this.#appender.flush();
  }

  /**
   * PUBREL: the client's QoS 2 publish is complete, its packet id free again; PUBCOMP
   * [MQTT-4.3.3-4]. MQTT 5 says 0x92 Packet Identifier not found for an id not held.
   */
  release(packetId: number): undefined {
    const held = this.#appender.qos2.released(packetId);
    if (held || this.#site.v5 == null) this.#site.outbox.pushAck(packetId, AckType.PUBCOMP);
    else this.#site.outbox.push(unknownPubcomp(packetId));
  }

  /** Resolves when an append settles (the per-client bound may have room again). */
  room(): Promise<void> {
    return this.#appender.room();
  }

  /** Resolves when no append is in flight and no PUBACK is owed (or on {@link wake}). */
  idle(): Promise<void> {
    return this.#appender.idle();
  }

  /** The connection closed: nobody waits for room or idleness any more. */
  wake(): void {
    this.#appender.wake();
  }
}

/**
 * Back-pressure before each read: per-client and gateway-wide bounds on waiting appends. The
 * promise to wait for before checking again, or undefined when the read may go on.
 */
export function readGate(
  ctx: Pick<SessionContext, "config" | "appendBudget">,
  pub: ConnectionPublisher | null,
): Promise<void> | undefined {
  if (pub !== null && pub.inflight >= ctx.config.limits.max_inflight_publishes_per_client) {
    return pub.room();
  }
  if (ctx.appendBudget.full) return ctx.appendBudget.room();
  return undefined;
}

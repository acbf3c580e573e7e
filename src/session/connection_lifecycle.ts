/**
 * A connection's life apart from its read loop (`connection.ts`): it joins the gateway's set of
 * open connections and the deadline wheel (`start`), takes its client id once its CONNECT is
 * accepted (`connected`: the claim, which closes an older connection of the same id, and a
 * stored session resumed or made), and ends: at once (`close`: the client's subscriptions
 * detached, its will published), after what is queued was written (`closeAfterFlush`), telling
 * an MQTT 5 client why (`disconnect`), or as a graceful stop (`drain`: appends in flight finish
 * and their PUBACKs go first; `stopped`: the client is told where to go).
 *
 * @module
 */
import { OutboundTopicAliases } from "../codec/topic_alias_out.ts";
import type { Principal } from "../log/port.ts";
import { startConnectionSpan } from "../observe/tracing.ts";
import type { AcceptedConnect, ConnectResult } from "./connect.ts";
import type { SessionContext } from "./context.ts";
import type { DeadlineOwner } from "../base/deadline_wheel.ts";
import type { Subscriber } from "./delivery_port.ts";
import type { V5Session } from "./v5_session.ts";
import { decoderFor, type PacketDecoder } from "./decoder_of.ts";
import type { StoredSession } from "./stored_sessions.ts";
import type { LocalClaim } from "./session_claims.ts";
import { Outbox } from "./outbox.ts";
import type { ConnectionPublisher, PublishSite } from "./connection_publisher.ts";
import { closeQuietly, lingerThenClose, type Transport } from "./transport.ts";
import { type HeldWill, publishOnClose } from "./will.ts";
import { act, lastWord, type WireSite } from "./wire.ts";
import { claimClientId, type ClaimedClientId } from "./client_id_owner.ts";
import type { Span, SpanContext } from "@opentelemetry/api";

/** What a connection is between its accept and its close; the read loop is the subclass's. */
export abstract class ConnectionLifecycle
  implements Subscriber, DeadlineOwner, PublishSite, WireSite {
  readonly outbox: Outbox;
  lastActivity: number;
  timeoutMs: number;
  deadlineSlot: number | undefined = undefined;
  protected readonly ctx: SessionContext;
  protected readonly transport: Transport;
  protected readonly decoder: PacketDecoder;
  /** The client id once the CONNECT was accepted (null before). */
  protected connectedAs: string | null = null;
  #principal: Principal | null = null;
  /** The principal that owns this connection's client id (Registered); set at CONNECT. */
  ownerName: string | undefined;
  /** The will to publish if this connection ends without DISCONNECT. */
  #will: HeldWill | null = null;
  /** Its claim of the client id across gateways (Registered; null: alone); set at CONNECT. */
  claim: LocalClaim | null = null;
  /** The stored session this connection resumed or created (null: clean); set at CONNECT. */
  session: StoredSession | null = null;
  protected isClosed = false;
  /** No new packets are handled (stop, DISCONNECT, refused CONNECT); acknowledgements still are. */
  protected draining = false;
  /** The PUBLISH pipeline; made on the first PUBLISH (idle connections: none). */
  protected publisher: ConnectionPublisher | null = null;
  #span: Span | null = null;
  /** The gateway's set of open connections; this one leaves it when closed. */
  #live: Set<ConnectionLifecycle> | null = null;
  /** MQTT 5 session state (null on 3.1.1 and before CONNACK). */
  #v5: V5Session | null = null;

  /** PUBLISH packets received in total, and when the socket was accepted (the admin listing). */
  messagesIn = 0;
  readonly acceptedAt: number;

  constructor(transport: Transport, ctx: SessionContext) {
    this.ctx = ctx;
    this.transport = transport;
    this.decoder = decoderFor(ctx.config, ctx.partialPackets);
    this.outbox = new Outbox(transport, ctx.outboundBudget, this);
    this.lastActivity = this.acceptedAt = transport.acceptedAt ?? ctx.clock.now();
    this.timeoutMs = ctx.config.limits.connect_timeout_ms;
  }

  get clientId(): string {
    return this.connectedAs ?? "";
  }

  get principal(): Principal {
    return this.#principal!;
  }

  get closed(): boolean {
    return this.isClosed;
  }

  get spanContext(): SpanContext | null {
    return this.#span?.spanContext() ?? null;
  }

  /** MQTT 5 session state once connected; null on 3.1.1. */
  get v5(): V5Session | null {
    return this.#v5;
  }
  /** The CONNECT was MQTT 5 (WireSite). */
  get speaks5(): boolean {
    return this.decoder.v5;
  }

  /** The transport starts pushing reads into the connection (its read loop). */
  protected abstract listen(): void;

  /**
   * Starts the connection: the transport pushes reads from now on. `live` is the gateway's set
   * of open connections: this one joins it now and leaves it when closed (a set, not a
   * callback: no closure per connection). Never throws.
   */
  start(live?: Set<ConnectionLifecycle>): void {
    this.#live = live ?? null;
    this.#live?.add(this);
    this.ctx.deadlines.add(this);
    this.listen();
  }

  /** Deadline wheel: no CONNECT in time, or 1.5× keep-alive of silence. */
  expire(): void {
    this.ctx.metrics.keepAliveExpired.inc();
    this.ctx.logger.limited("info", "Closing silent connection", {
      client_id: this.connectedAs,
      after_ms: this.timeoutMs,
    });
    if (this.connectedAs === null) return this.close("no CONNECT in time");
    this.disconnect(0x8d, "keep-alive timeout"); // [MQTT-3.1.2-22]
  }

  /** Closes; tells an MQTT 5 client why first ({@link lastWord}), not waiting on the peer. */
  disconnect(
    reasonCode: number,
    reason: string,
    inConnect = false,
    serverReference?: string,
  ): void {
    if (this.isClosed) return;
    const packet = lastWord(this.#v5, inConnect, reasonCode, reason, serverReference);
    this.close(reason, packet !== null); // first: a write failing at once finds it closed
    if (packet !== null) this.transport.write(packet).catch(() => {});
  }

  /** Closes at once, dropping pending output; idempotent. `linger`: see `lingerThenClose`. */
  close(reason: string, linger = false): void {
    if (this.isClosed) return;
    this.isClosed = true;
    const ctx = this.ctx;
    ctx.deadlines.remove(this);
    this.decoder.discard(); // gives the bytes of a partly received packet back
    this.outbox.close();
    if (linger) lingerThenClose(this.transport);
    else closeQuietly(this.transport);
    ctx.registry.release(this, this.connectedAs);
    this.#span?.end();
    if (this.#principal !== null) ctx.delivery.detach(this);
    // Ended without DISCONNECT (keep-alive, error, takeover, stop) or by 0x04 (expiry may be 0).
    const will = this.#will;
    this.#will = null;
    if (will !== null) {
      const expiry = this.session?.expiryS ?? this.#v5?.sessionExpiry;
      publishOnClose(ctx, will, this.#principal!, this.connectedAs!, expiry);
    }
    this.publisher?.wake();
    ctx.logger.debug("Connection closed", { client_id: this.connectedAs, reason });
    this.#live?.delete(this);
    this.#live = null;
  }

  /** AckQueue: a QoS 1 publish gets no PUBACK, so the connection must close. */
  unacknowledged(): void {
    this.closeAfterFlush("QoS 1 publish not acknowledged [MQTT-3.3.5-2]");
  }

  /** Graceful stop: no new packets; appends finish and their PUBACKs go; then close. */
  async drain(): Promise<void> {
    this.draining = true;
    const pub = this.publisher;
    if (pub !== null) {
      pub.flush();
      // Settled on the event: the last append's answer or PUBACK release (or close) resolves it.
      if (!this.isClosed) await pub.idle();
    }
    await this.outbox.drained();
    this.stopped();
  }

  /**
   * The gateway stops: an MQTT 5 client is told where to go (0x9C Use another server with
   * `mqtt5.server_reference`) or that the server is shutting down (0x8B); 3.1.1 is closed.
   */
  stopped(): void {
    const reference = this.ctx.config.mqtt5.server_reference;
    if (reference === "") return this.disconnect(0x8b, "gateway stopping");
    this.disconnect(0x9c, "gateway stopping: use another server", false, reference);
  }

  /** Takes no new packets and closes once what is queued has been written (WireSite). */
  closeAfterFlush(reason: string): void {
    if (this.isClosed) return;
    this.draining = true;
    this.outbox.drained().then(() => this.close(reason));
  }

  /** The CONNECT was decided (null: closed meanwhile); a resumed session is restored first. */
  protected connected(r: ConnectResult | null): Promise<void> | undefined {
    if (r === null || this.isClosed) return;
    if (r.kind !== "accepted") return act(this.ctx, this, r);
    const claimed = claimClientId(this.ctx, this, r);
    if ("kind" in claimed) return act(this.ctx, this, claimed);
    const present = this.#establish(r, claimed);
    act(this.ctx, this, present ? { ...r.connack, sessionPresent: true } : r.connack);
    if (r.claim?.supersededBy) return void this.ctx.claims?.superseded(r.clientId, this, r.claim);
    return present ? this.ctx.delivery.resume(this) : undefined;
  }

  /** Takes the accepted session (will, keep-alive) with its claimed id; resumed or not. */
  #establish(s: AcceptedConnect, opened: ClaimedClientId): boolean {
    this.#will = s.will;
    this.#principal = s.principal;
    this.ownerName = s.principal.username;
    this.connectedAs = s.clientId;
    this.claim = s.claim;
    this.#v5 = s.v5;
    this.outbox.aliases = OutboundTopicAliases.upTo(s.v5?.topicAliasesOut ?? 0);
    this.#span = startConnectionSpan(s.clientId, this.transport.remoteAddress);
    this.session = opened.session;
    this.timeoutMs = s.timeoutMs;
    this.lastActivity = this.ctx.clock.now();
    this.ctx.deadlines.add(this);
    return opened.present;
  }

  /** DISCONNECT: the will is not published (WireSite). */
  discardWill(): void {
    this.#will = null;
  }

  /** The peer's address (ConnectSite, WireSite). */
  get remoteAddress(): string {
    return this.transport.remoteAddress;
  }
  get listener(): string { // which listener accepted it (WireSite)
    return this.transport.listener ?? "tcp";
  }

  /** The name of the peer's verified client certificate, if any (ConnectSite). */
  get certificateName(): string | undefined {
    return this.transport.certificateName;
  }
}

/**
 * One MQTT connection: the read loop (reads pushed by the {@link Transport}, decoded by the
 * codec's `PacketDecoder`), a dispatcher handing each packet to its handler (`connect.ts`,
 * `publish_batch.ts`, `subscribe.ts`, `control.ts`), and the outbox on the way out. Handlers
 * return outcomes that `wire.ts` `act()` turns into wire actions; PUBACKs and PUBRECs leave
 * through `pubackReady` (the fast path allocates no outcome).
 *
 * @module
 */
import { OutboundTopicAliases } from "../codec/topic_alias_out.ts";
import { ProtocolError } from "../codec/errors.ts";
import type { ClientPacket } from "../codec/packets.ts";
import type { Principal } from "../log/port.ts";
import { startConnectionSpan } from "../observe/tracing.ts";
import { type AcceptedConnect, type ConnectResult, handleConnect } from "./connect.ts";
import type { SessionContext } from "./context.ts";
import { handleDisconnect, handlePingreq, handleUnsupportedConnect } from "./control.ts";
import type { DeadlineOwner } from "../base/deadline_wheel.ts";
import { isAck, type Subscriber } from "./delivery_port.ts";
import type { V5Session } from "./v5_session.ts";
import { countReadError, decoderFor, type PacketDecoder } from "./decoder_of.ts";
import type { StoredSession } from "./stored_sessions.ts";
import { Outbox } from "./outbox.ts";
import { ConnectionPublisher, type PublishSite, readGate } from "./publish_batch.ts";
import { handleSubscribe, handleUnsubscribe } from "./subscribe.ts";
import { closeQuietly, lingerThenClose, type Transport, type TransportSink } from "./transport.ts";
import { type HeldWill, publishOnClose } from "./will.ts";
import { act, lastWord, type WireSite } from "./wire.ts";
import { claimClientId, type ClaimedClientId } from "./client_id_owner.ts";
import type { Span, SpanContext } from "@opentelemetry/api";

/** Shared empty packet list: an idle connection holds none of its own. */
const NO_PACKETS: ClientPacket[] = [];

/** One client connection. */
export class Connection implements Subscriber, DeadlineOwner, TransportSink, PublishSite, WireSite {
  readonly outbox: Outbox;
  lastActivity: number;
  timeoutMs: number;
  #ctx: SessionContext;
  #transport: Transport;
  #decoder: PacketDecoder;
  #clientId: string | null = null;
  #principal: Principal | null = null;
  /** The principal that owns this connection's client id (Registered); set at CONNECT. */
  ownerName: string | undefined;
  /** The will to publish if this connection ends without DISCONNECT. */
  #will: HeldWill | null = null;
  /** The stored session this connection resumed or created (null: clean); set at CONNECT. */
  session: StoredSession | null = null;
  #closed = false;
  #draining = false;
  /** The PUBLISH pipeline; made on the first PUBLISH (idle connections: none). */
  #publisher: ConnectionPublisher | null = null;
  #span: Span | null = null;
  /** Packets of the current read and the next one to handle. */
  #packets: ClientPacket[] = NO_PACKETS;
  #next = 0;
  #backlog: Uint8Array[] | null = null; // reads that arrived while paused (rare; copies)
  /** A step is waiting (reads are paused until it settles). */
  #busy = false;
  #paused = false;
  #eof = false; // the transport ended: close once the current packets are handled
  /** The gateway's set of open connections; this one leaves it when closed. */
  #live: Set<Connection> | null = null;
  #v5: V5Session | null = null; // MQTT 5 session state (null on 3.1.1 and before CONNACK)
  /** PUBLISH packets received in total, and when the socket was accepted (the admin listing). */
  messagesIn = 0;
  readonly acceptedAt: number;

  constructor(transport: Transport, ctx: SessionContext) {
    this.#ctx = ctx;
    this.#transport = transport;
    this.#decoder = decoderFor(ctx.config, ctx.partialPackets);
    this.outbox = new Outbox(transport, ctx.outboundBudget, this);
    this.lastActivity = this.acceptedAt = transport.acceptedAt ?? ctx.clock.now();
    this.timeoutMs = ctx.config.limits.connect_timeout_ms;
  }

  get clientId(): string {
    return this.#clientId ?? "";
  }

  get principal(): Principal {
    return this.#principal!;
  }

  get closed(): boolean {
    return this.#closed;
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
    return this.#decoder.v5;
  }

  /**
   * Starts the connection: the transport pushes reads into {@link data} from now on. `live`
   * is the gateway's set of open connections: this one joins it now and leaves it when closed
   * (a set, not a callback: no closure per connection). Never throws.
   */
  start(live?: Set<Connection>): void {
    this.#live = live ?? null;
    this.#live?.add(this);
    this.#ctx.deadlines.add(this);
    this.#transport.start(this);
  }

  /**
   * A read arrived (TransportSink): decode it and handle its packets in order. Synchronous
   * while nothing must wait; when a packet must (CONNECT authentication, a metadata lookup,
   * SUBSCRIBE) or the read gate is shut, the transport is paused and the rest of the packets
   * wait here. An idle connection thus holds no promise at all (memory per connection).
   */
  data(chunk: Uint8Array): void {
    if (this.#closed) return;
    if (this.#busy) {
      // Read while paused (a transport may deliver what it had already read): keep a copy.
      (this.#backlog ??= []).push(chunk.slice());
      this.#pauseReads();
      return;
    }
    this.#decode(chunk);
    this.#drain();
  }

  /** End of stream or read error (TransportSink). */
  end(error?: unknown): void {
    if (this.#closed) return closeQuietly(this.#transport); // the peer ended a linger
    if (error !== undefined) this.#onError(error);
    this.#eof = true;
    if (!this.#busy) this.#finish();
  }

  #decode(chunk: Uint8Array): void {
    try {
      // Before CONNECT, bytes do not extend the deadline: connect_timeout_ms runs from
      // accept to a complete CONNECT, however slowly it trickles in (slowloris).
      if (this.#clientId !== null) this.lastActivity = this.#ctx.clock.now();
      this.#ctx.metrics.bytesIn.inc({}, chunk.length);
      this.#packets = this.#decoder.push(chunk);
      this.#next = 0;
    } catch (err) {
      this.#onError(err);
      this.#packets = NO_PACKETS;
      this.#next = 0;
      this.#publisher?.flush();
      if (err instanceof ProtocolError) {
        this.disconnect(err.reasonCode, err.reason, err.inV5Connect);
      }
      this.#finish();
    }
  }

  /** Handles packets until one must wait, then the read gate; re-entered when it settles. */
  #drain(): void {
    const ctx = this.#ctx;
    if (this.#closed) return;
    try {
      for (;;) {
        while (this.#next < this.#packets.length) {
          if (this.#closed) return;
          const p = this.#packets[this.#next++];
          // Draining (stop, DISCONNECT, refused CONNECT): no new work, but PUBACKs (and
          // PUBRECs) still settle deliveries, so acknowledged copies are not redelivered.
          if (this.#draining) {
            if (this.#principal !== null && isAck(p)) ctx.delivery.acknowledged(this, p);
            continue;
          }
          const pending = this.#handle(p);
          if (pending !== undefined) return this.#waitFor(pending);
        }
        this.#packets = NO_PACKETS;
        this.#next = 0;
        this.#publisher?.flush();
        // A client that sends but never reads (PINGREQ or QoS 1 floods) would grow its
        // outbox without bound: past twice the per-client cap it is closed.
        if (this.outbox.queuedBytes > 2 * ctx.config.limits.max_outbound_queue_bytes_per_client) {
          ctx.metrics.evictions.inc();
          return this.disconnect(0x97, "client does not read its socket: outbound queue hard cap");
        }
        const backlog = this.#backlog;
        if (backlog === null || backlog.length === 0) break;
        this.#decode(backlog.shift()!);
        if (this.#closed) return;
      }
      if (this.#eof) return this.#finish();
      const gate = this.#readGate();
      if (gate !== undefined) return this.#waitFor(gate);
      if (this.#paused) {
        this.#paused = false;
        this.#transport.resume();
      }
    } catch (err) {
      this.#onError(err);
      this.#finish();
    }
  }

  /** Pauses reads until `pending` settles, then goes on draining. */
  #waitFor(pending: Promise<void>): void {
    this.#busy = true;
    this.#pauseReads();
    pending.then(
      () => {
        this.#busy = false;
        this.#drain();
      },
      (err) => {
        this.#busy = false;
        this.#onError(err);
        this.#finish();
      },
    );
  }

  #pauseReads(): void {
    if (this.#paused) return;
    this.#paused = true;
    this.#transport.pause();
  }

  /** The read side is over: append what this read produced, then close. */
  #finish(): void {
    this.#publisher?.flush();
    this.close("connection ended");
  }

  /** Back-pressure before each read (see {@link readGate}). */
  #readGate(): Promise<void> | undefined {
    if (this.#closed) return undefined;
    return readGate(this.#ctx, this.#publisher)?.then(() => this.#readGate());
  }

  /** Deadline wheel: no CONNECT in time, or 1.5× keep-alive of silence. */
  expire(): void {
    this.#ctx.metrics.keepAliveExpired.inc();
    this.#ctx.logger.limited("info", "Closing silent connection", {
      client_id: this.#clientId,
      after_ms: this.timeoutMs,
    });
    if (this.#clientId === null) return this.close("no CONNECT in time");
    this.disconnect(0x8d, "keep-alive timeout"); // [MQTT-3.1.2-22]
  }

  /** Closes; tells an MQTT 5 client why first ({@link lastWord}), not waiting on the peer. */
  disconnect(reasonCode: number, reason: string, inConnect = false): void {
    if (this.#closed) return;
    const packet = lastWord(this.#v5, inConnect, reasonCode, reason);
    this.close(reason, packet !== null); // first: a write failing at once finds it closed
    if (packet !== null) this.#transport.write(packet).catch(() => {});
  }

  /** Closes at once, dropping pending output; idempotent. `linger`: see `lingerThenClose`. */
  close(reason: string, linger = false): void {
    if (this.#closed) return;
    this.#closed = true;
    const ctx = this.#ctx;
    ctx.deadlines.remove(this);
    this.#decoder.discard(); // gives the bytes of a partly received packet back
    this.outbox.close();
    if (linger) lingerThenClose(this.#transport);
    else closeQuietly(this.#transport);
    ctx.registry.release(this, this.#clientId);
    this.#span?.end();
    if (this.#principal !== null) ctx.delivery.detach(this);
    // Ended without DISCONNECT (keep-alive, error, takeover, stop) or by 0x04 (expiry may be 0).
    const will = this.#will;
    this.#will = null;
    if (will !== null) {
      const expiry = this.session?.expiryS ?? this.#v5?.sessionExpiry;
      publishOnClose(ctx, will, this.#principal!, this.#clientId!, expiry);
    }
    this.#publisher?.wake();
    ctx.logger.debug("Connection closed", { client_id: this.#clientId, reason });
    this.#live?.delete(this);
    this.#live = null;
  }

  /** AckQueue: the PUBACK (or PUBREC: `type`) of `packetId`, or `packet`, may go now. */
  pubackReady(packetId: number, packet: Uint8Array | undefined, type: number): void {
    packet === undefined ? this.outbox.pushPuback(packetId, type) : this.outbox.push(packet);
  }

  /** AckQueue: a QoS 1 publish gets no PUBACK, so the connection must close. */
  unacknowledged(): void {
    this.closeAfterFlush("QoS 1 publish not acknowledged [MQTT-3.3.5-2]");
  }

  /** Graceful stop: no new packets; appends finish and their PUBACKs go; then close. */
  async drain(): Promise<void> {
    this.#draining = true;
    const pub = this.#publisher;
    if (pub !== null) {
      pub.flush();
      // Settled on the event: the last append's answer or PUBACK release (or close) resolves it.
      if (!this.#closed) await pub.idle();
    }
    await this.outbox.drained();
    this.disconnect(0x8b, "gateway stopping");
  }

  /** Takes no new packets and closes once what is queued has been written (WireSite). */
  closeAfterFlush(reason: string): void {
    if (this.#closed) return;
    this.#draining = true;
    this.outbox.drained().then(() => this.close(reason));
  }

  #onError(err: unknown): void {
    countReadError(this.#ctx, err, this.#clientId, this.#transport.remoteAddress, this.#closed);
  }

  /** The dispatcher: a promise only when the next packet must wait (PUBLISH, PUBACK: none). */
  #handle(p: ClientPacket): Promise<void> | undefined {
    const ctx = this.#ctx;
    switch (p.type) {
      case "publish":
        this.messagesIn++;
        return (this.#publisher ??= this.#newPublisher()).publish(p);
      case "puback":
        ctx.delivery.puback(this, p.packetId);
        return;
      case "pubrec":
      case "pubcomp":
        ctx.delivery.acknowledged(this, p);
        return;
      case "pubrel":
        return (this.#publisher ??= this.#newPublisher()).release(p.packetId);
      case "connect":
        return handleConnect(ctx, p, this).then((r) => this.#connected(r));
      case "connect_unsupported":
        return act(this.#ctx, this, handleUnsupportedConnect(p));
      case "subscribe":
        return handleSubscribe(ctx, this, p).then((o) => act(this.#ctx, this, o));
      case "unsubscribe":
        return act(this.#ctx, this, handleUnsubscribe(ctx, this, p, this.speaks5));
      case "pingreq":
        return act(this.#ctx, this, handlePingreq());
      case "disconnect":
        return act(ctx, this, handleDisconnect(p, this.session, ctx.config.session.max_expiry_s));
    }
  }

  /** The CONNECT was decided (null: closed meanwhile); a resumed session is restored first. */
  #connected(r: ConnectResult | null): Promise<void> | undefined {
    if (r === null || this.#closed) return;
    if (r.kind !== "accepted") return act(this.#ctx, this, r);
    const claimed = claimClientId(this.#ctx, this, r);
    if ("kind" in claimed) return act(this.#ctx, this, claimed);
    const present = this.#establish(r, claimed);
    act(this.#ctx, this, present ? { ...r.connack, sessionPresent: true } : r.connack);
    return present ? this.#ctx.delivery.resume(this) : undefined;
  }

  /** Takes the accepted session (will, keep-alive) with its claimed id; resumed or not. */
  #establish(s: AcceptedConnect, opened: ClaimedClientId): boolean {
    this.#will = s.will;
    this.#principal = s.principal;
    this.ownerName = s.principal.username;
    this.#clientId = s.clientId;
    this.#v5 = s.v5;
    this.outbox.aliases = OutboundTopicAliases.upTo(s.v5?.topicAliasesOut ?? 0);
    this.#span = startConnectionSpan(s.clientId, this.#transport.remoteAddress);
    this.session = opened.session;
    this.timeoutMs = s.timeoutMs;
    this.lastActivity = this.#ctx.clock.now();
    this.#ctx.deadlines.add(this);
    return opened.present;
  }

  #newPublisher(): ConnectionPublisher {
    return new ConnectionPublisher(this.#ctx, this, this.#principal!, this.#clientId!);
  }

  /** DISCONNECT: the will is not published (WireSite). */
  discardWill(): void {
    this.#will = null;
  }

  get remoteAddress(): string { // the peer's address (ConnectSite, WireSite)
    return this.#transport.remoteAddress;
  }
  get listener(): string { // which listener accepted it (WireSite)
    return this.#transport.listener ?? "tcp";
  }

  /** The name of the peer's verified client certificate, if any (ConnectSite). */
  get certificateName(): string | undefined {
    return this.#transport.certificateName;
  }
}

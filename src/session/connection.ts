/**
 * One MQTT connection: the pipeline `read → decode → authorize → map → append` on the way
 * in (reads pushed by the {@link Transport}, decoded by the codec's `PacketDecoder`), and the outbox on the
 * way out. The listeners drive it over TCP (node:net) and TLS (a pull loop).
 *
 * This is the one place where outcomes become wire actions (CONNACK code, SUBACK, PUBACK or
 * not, close) and counters.
 *
 * @module
 */
import {
  ConnackCode,
  encodeConnack,
  encodePingresp,
  encodePuback,
  encodeSuback,
  encodeUnsuback,
} from "../codec/encoder.ts";
import { PacketDecoder } from "../codec/decoder.ts";
import { ProtocolError } from "../codec/errors.ts";
import { utf8Length } from "../base/utf8.ts";
import { isControlChar } from "../codec/mqtt_string.ts";
import type { ClientPacket, ConnectPacket, PublishPacket } from "../codec/packets.ts";
import { BackendError, type OutgoingMessage, type PartitionAddress } from "../log/port.ts";
import type { Principal } from "../log/port.ts";
import { AckQueue } from "./ack_queue.ts";
import type { DeadlineOwner } from "../base/deadline_wheel.ts";
import type { Subscriber } from "./delivery_port.ts";
import { Outbox } from "./outbox.ts";
import type { SessionContext } from "./context.ts";
import type { Transport, TransportSink } from "./transport.ts";
import { type HeldWill, refuseWill } from "./will.ts";
import { type Span, type SpanContext, SpanStatusCode } from "@opentelemetry/api";
import { startAppendSpan, startConnectionSpan } from "../observe/tracing.ts";

/** Shared empty packet list: an idle connection holds none of its own. */
const NO_PACKETS: ClientPacket[] = [];

/** Messages of one read bound for one partition, appended together. */
interface PartitionBatch {
  readonly address: PartitionAddress;
  readonly messages: OutgoingMessage[];
  /** The AckQueue slot of each message; -1 for QoS 0 (no PUBACK). */
  readonly slots: number[];
}

/**
 * Empties a settled batch. Measured: without this, a promoted closure context kept each
 * batch's messages reachable until the next full GC, and young-generation GC copied ~4 MB of
 * dead messages per scavenge under QoS 1 load (20 ms pauses, the PUBACK p99 tail).
 */
function release(b: PartitionBatch): void {
  b.messages.length = 0;
  b.slots.length = 0;
}

/** Client ids with wildcards or control characters get CONNACK 2 (they travel in headers). */
function isForbiddenClientId(id: string): boolean {
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    if (c === 0x23 || c === 0x2b || isControlChar(c)) return true;
  }
  return false;
}

/** One client connection. */
export class Connection implements Subscriber, DeadlineOwner, TransportSink {
  readonly outbox: Outbox;
  lastActivity: number;
  timeoutMs: number;
  #ctx: SessionContext;
  #transport: Transport;
  #decoder: PacketDecoder;
  #acks: AckQueue;
  #clientId: string | null = null;
  #principal: Principal | null = null;
  /** The will to publish if this connection ends without DISCONNECT. */
  #will: HeldWill | null = null;
  #closed = false;
  #draining = false;
  /** This read's appends per partition; made on the first PUBLISH (idle connections: none). */
  #batch: Map<PartitionAddress, PartitionBatch> | null = null;
  /** Messages of this connection waiting for the backend (bounded per client). */
  #inflight = 0;
  #roomWaiter: (() => void) | null = null;
  #span: Span | null = null;
  /** Packets of the current read and the next one to handle. */
  #packets: ClientPacket[] = NO_PACKETS;
  #next = 0;
  /** Reads that arrived while paused (rare; copies). */
  #backlog: Uint8Array[] | null = null;
  /** A step is waiting (reads are paused until it settles). */
  #busy = false;
  #paused = false;
  /** The transport ended; close once the current packets are handled. */
  #eof = false;
  /** The gateway's set of open connections; this one leaves it when closed. */
  #live: Set<Connection> | null = null;

  constructor(transport: Transport, ctx: SessionContext) {
    this.#ctx = ctx;
    this.#transport = transport;
    const l = ctx.config.limits;
    this.#decoder = new PacketDecoder({
      maxPacketBytes: l.max_packet_bytes,
      maxTopicBytes: l.max_topic_bytes,
      maxTopicLevels: l.max_topic_levels,
    });
    this.outbox = new Outbox(transport, ctx.outboundBudget, this);
    this.#acks = new AckQueue(this);
    this.lastActivity = transport.acceptedAt ?? ctx.clock.now();
    this.timeoutMs = l.connect_timeout_ms;
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
      this.#finish();
    }
  }

  /**
   * Handles decoded packets until one must wait, then the read gate; resumes the transport
   * when everything is done. Re-entered from the promise a waiting step returned.
   */
  #drain(): void {
    const ctx = this.#ctx;
    if (this.#closed) return;
    try {
      for (;;) {
        while (this.#next < this.#packets.length) {
          if (this.#closed) return;
          const p = this.#packets[this.#next++];
          // Draining (stop, DISCONNECT, refused CONNECT): no new work, but PUBACKs still
          // settle deliveries, so acknowledged copies are not redelivered after a restart.
          if (this.#draining) {
            if (p.type === "puback" && this.#principal !== null) {
              ctx.delivery.puback(this, p.packetId);
            }
            continue;
          }
          const pending = this.#handle(p);
          if (pending !== undefined) return this.#waitFor(pending);
        }
        this.#packets = NO_PACKETS;
        this.#next = 0;
        this.#flushBatch();
        // A client that sends but never reads (PINGREQ or QoS 1 floods) would grow its
        // outbox without bound: past twice the per-client cap it is closed.
        if (this.outbox.queuedBytes > 2 * ctx.config.limits.max_outbound_queue_bytes_per_client) {
          ctx.metrics.evictions.inc();
          this.close("client does not read its socket: outbound queue over the hard cap");
          return;
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
    this.#flushBatch();
    this.close("connection ended");
  }

  /** Back-pressure before each read: per-client and gateway-wide bounds on waiting appends. */
  #readGate(): Promise<void> | undefined {
    if (this.#closed) return undefined;
    if (this.#inflight >= this.#ctx.config.limits.max_inflight_publishes_per_client) {
      return new Promise<void>((r) => this.#roomWaiter = r).then(() => this.#readGate());
    }
    if (this.#ctx.appendBudget.full) {
      return this.#ctx.appendBudget.room().then(() => this.#readGate());
    }
    return undefined;
  }

  /** Called by the deadline wheel: no CONNECT in time, or 1.5× keep-alive of silence. */
  expire(): void {
    this.#ctx.metrics.keepAliveExpired.inc();
    this.#ctx.logger.limited("info", "Closing silent connection", {
      client_id: this.#clientId,
      after_ms: this.timeoutMs,
    });
    this.close(this.#clientId === null ? "no CONNECT in time" : "keep-alive expired");
  }

  /** Closes at once: pending output is dropped. Idempotent. */
  close(reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    const ctx = this.#ctx;
    ctx.deadlines.remove(this);
    this.outbox.close();
    try {
      this.#transport.close();
    } catch { /* already closed */ }
    ctx.registry.release(this, this.#clientId);
    this.#span?.end();
    if (this.#principal !== null) ctx.delivery.detach(this);
    // Ended without DISCONNECT (that clears the will): keep-alive, error, takeover, stop.
    const will = this.#will;
    if (will !== null) {
      this.#will = null;
      ctx.wills.publish(ctx, will, this.#principal!, this.#clientId!);
    }
    this.#roomWaiter?.();
    ctx.logger.debug("Connection closed", { client_id: this.#clientId, reason });
    this.#live?.delete(this);
    this.#live = null;
  }

  /** AckQueue: the PUBACK of `packetId` may go now. */
  pubackReady(packetId: number): void {
    this.outbox.push(encodePuback(packetId));
  }

  /** AckQueue: a QoS 1 publish gets no PUBACK, so the connection must close. */
  unacknowledged(): void {
    this.#closeAfterFlush("QoS 1 publish not acknowledged [MQTT-3.3.5-2]");
  }

  /** Graceful stop: take no new packets, finish appends, send their PUBACKs, then close. */
  async drain(): Promise<void> {
    this.#draining = true;
    this.#flushBatch();
    while (!this.#closed && (this.#inflight > 0 || this.#acks.pending > 0)) {
      await new Promise((r) => setTimeout(r, 5));
    }
    await this.outbox.drained();
    this.close("gateway stopping");
  }

  #closeAfterFlush(reason: string): void {
    if (this.#closed) return;
    this.#draining = true;
    this.outbox.drained().then(() => this.close(reason));
  }

  #onError(err: unknown): void {
    const ctx = this.#ctx;
    if (err instanceof ProtocolError) {
      ctx.metrics.protocolErrors.inc({ rule: err.rule });
      if (err.packetType === 3) ctx.metrics.outcome.rejected.inc();
      ctx.logger.limited("warn", "Protocol violation; closing connection", {
        client_id: this.#clientId,
        remote: this.#transport.remoteAddress,
        error: err.message,
      });
    } else if (!this.#closed) {
      ctx.logger.debug("Connection read failed", { client_id: this.#clientId, error: err });
    }
  }

  /** Dispatches one packet; returns a promise only when the next packet must wait. */
  #handle(p: ClientPacket): Promise<void> | undefined {
    switch (p.type) {
      case "connect":
        return this.#onConnect(p);
      case "connect_unsupported":
        // [MQTT-3.1.2-2]: unacceptable protocol level → CONNACK 1, then close.
        this.#ctx.metrics.connectionsRefused.inc({ reason: "protocol_version" });
        this.outbox.push(encodeConnack(false, ConnackCode.UNACCEPTABLE_PROTOCOL_VERSION));
        this.#closeAfterFlush(`unsupported protocol ${p.protocolName} level ${p.level}`);
        return;
      case "publish":
        return this.#onPublish(p);
      case "puback":
        this.#ctx.delivery.puback(this, p.packetId);
        return;
      case "subscribe":
        return this.#ctx.delivery.subscribe(this, p.subscriptions).then((codes) => {
          this.outbox.push(encodeSuback(p.packetId, codes));
        });
      case "unsubscribe":
        this.#ctx.delivery.unsubscribe(this, p.filters);
        this.outbox.push(encodeUnsuback(p.packetId));
        return;
      case "pingreq":
        this.outbox.push(encodePingresp());
        return;
      case "disconnect":
        // The will is discarded on DISCONNECT [MQTT-3.14.4-3].
        this.#will = null;
        this.#closeAfterFlush("client disconnected");
        return;
    }
  }

  async #onConnect(p: ConnectPacket): Promise<void> {
    const ctx = this.#ctx;
    const refuse = (code: number, reason: string) => {
      ctx.metrics.connectionsRefused.inc({ reason: `connack_${code}` });
      if (code === ConnackCode.BAD_USERNAME_OR_PASSWORD || code === ConnackCode.NOT_AUTHORIZED) {
        ctx.metrics.authFailures.inc();
      }
      ctx.logger.limited("info", "CONNECT refused", {
        code,
        reason,
        remote: this.#transport.remoteAddress,
      });
      this.outbox.push(encodeConnack(false, code));
      this.#closeAfterFlush(reason);
    };
    let clientId = p.clientId;
    if (clientId === "") {
      // [MQTT-3.1.3-8] an empty id needs a clean session; [MQTT-3.1.3-6] we then assign one.
      if (!p.cleanSession) return refuse(ConnackCode.IDENTIFIER_REJECTED, "empty client id");
      clientId = `auto-${crypto.randomUUID()}`;
    }
    if (isForbiddenClientId(clientId) || utf8Length(clientId) > 255) {
      return refuse(
        ConnackCode.IDENTIFIER_REJECTED,
        "client id has forbidden characters or is too long",
      );
    }
    if (p.will !== null && ctx.config.session.will === "refuse") {
      return refuse(ConnackCode.NOT_AUTHORIZED, "will messages are not accepted (session.will)");
    }
    if (p.will?.qos === 2) return refuse(ConnackCode.NOT_AUTHORIZED, "QoS 2 wills are refused");
    const source = this.#transport.remoteAddress;
    const decision = await ctx.authenticator.authenticate(p, source);
    if (this.#closed) return;
    if (!decision.ok) {
      // Repeated failures from one source are slowed down (the connect timeout still applies).
      const delay = decision.connackCode === ConnackCode.BAD_USERNAME_OR_PASSWORD
        ? ctx.sourceGuard.failed(source)
        : 0;
      if (delay > 0) await new Promise((r) => setTimeout(r, delay));
      if (this.#closed) return;
      return refuse(decision.connackCode, decision.reason);
    }
    if (p.username !== null) ctx.sourceGuard.succeeded(source);
    if (p.will !== null) {
      const why = refuseWill(ctx, p.will, decision.principal);
      if (why !== null) return refuse(ConnackCode.NOT_AUTHORIZED, why);
      this.#will = p.will as HeldWill;
    }
    this.#principal = decision.principal;
    this.#clientId = clientId;
    this.#span = startConnectionSpan(clientId, this.#transport.remoteAddress);
    const old = ctx.registry.claim(clientId, this);
    if (old !== null) {
      ctx.metrics.takeovers.inc();
      old.close("taken over by a new connection with the same client id");
    }
    // Keep-alive: 0 (none) or above the cap is clamped to the cap; 1.5× grace [MQTT-3.1.2-24].
    const max = ctx.config.limits.max_keep_alive_s;
    const ka = p.keepAliveSeconds === 0 || p.keepAliveSeconds > max ? max : p.keepAliveSeconds;
    this.timeoutMs = ka * 1500;
    this.lastActivity = ctx.clock.now();
    ctx.deadlines.add(this);
    // Clean sessions only: session present is always 0 (DESIGN §2).
    this.outbox.push(encodeConnack(false, ConnackCode.ACCEPTED));
  }

  #onPublish(p: PublishPacket): Promise<void> | undefined {
    const prepared = this.#ctx.preparer.prepare(p, this.#principal!, this.#clientId!);
    if (prepared instanceof Promise) {
      // Metadata not cached: wait (this connection only) so per-partition order holds.
      this.#flushBatch();
      return prepared.then((r) => this.#route(p, r));
    }
    this.#route(p, prepared);
    return undefined;
  }

  #route(p: PublishPacket, r: Awaited<ReturnType<SessionContext["preparer"]["prepare"]>>): void {
    const ctx = this.#ctx;
    if (r.kind !== "append") {
      ctx.metrics.outcome[r.kind].inc();
      ctx.logger.limited("warn", `Publish ${r.kind}`, {
        client_id: this.#clientId,
        reason: r.reason,
      });
      if (p.qos === 1) this.#acks.settle(this.#acks.take(p.packetId), "close");
      return;
    }
    ctx.metrics.ruleHit(r.rule).inc();
    // The preparer hands out one address object per partition: it is the batch key.
    const a = r.address;
    const batches = this.#batch ??= new Map();
    let batch = batches.get(a);
    if (!batch) batches.set(a, batch = { address: a, messages: [], slots: [] });
    batch.messages.push(r.message);
    batch.slots.push(p.qos === 1 ? this.#acks.take(p.packetId) : -1);
    this.#inflight++;
    if (batch.messages.length >= ctx.config.limits.max_append_batch) this.#flushBatch();
  }

  /** P7: one append per partition for everything this read produced. */
  #flushBatch(): void {
    const batches = this.#batch;
    if (batches === null || batches.size === 0) return;
    const ctx = this.#ctx;
    for (const b of batches.values()) {
      const n = b.messages.length;
      const started = ctx.clock.now();
      ctx.appendBudget.add(n);
      ctx.metrics.appendBatch.observe(n);
      const span = startAppendSpan(
        this.spanContext,
        b.address.stream,
        b.address.topic,
        b.address.partition,
        n,
      );
      // Live subscribers get the messages once committed; the PUBACKs wait for the disk.
      let offered = false;
      const onCommitted = (baseOffset: number) => {
        offered = true;
        ctx.delivery.notifyAppended(b.address, baseOffset, b.messages);
      };
      ctx.backend.append({ ...b.address, messages: b.messages, onCommitted }).then(
        (receipt) => {
          const seconds = (ctx.clock.now() - started) / 1000;
          let acked = 0;
          for (const slot of b.slots) {
            if (slot < 0) continue;
            acked++;
            ctx.metrics.pubackLatency.observe(seconds);
            this.#acks.settle(slot, "ack");
          }
          if (acked > 0) ctx.metrics.outcome.acked.inc(acked);
          if (n - acked > 0) ctx.metrics.outcome.appended.inc(n - acked);
          span.end();
          this.#settled(n);
          if (!offered) ctx.delivery.notifyAppended(b.address, receipt.baseOffset, b.messages);
          release(b);
        },
        (err) => {
          ctx.metrics.outcome.failed.inc(n);
          if (err instanceof BackendError && err.code === "not_found") {
            ctx.preparer.topics.invalidate(b.address.stream, b.address.topic);
          }
          ctx.logger.limited("error", "Append failed; no PUBACK", {
            stream: b.address.stream,
            topic: b.address.topic,
            error: err,
          });
          span.setStatus({ code: SpanStatusCode.ERROR, message: String(err?.message ?? err) });
          span.end();
          for (const slot of b.slots) if (slot >= 0) this.#acks.settle(slot, "close");
          this.#settled(n);
          release(b);
        },
      );
    }
    batches.clear();
  }

  #settled(n: number): void {
    this.#inflight -= n;
    this.#ctx.appendBudget.release(n);
    const w = this.#roomWaiter;
    this.#roomWaiter = null;
    w?.();
  }
}

/**
 * One MQTT connection's read loop: reads pushed by its `Transport`, decoded by the codec's
 * `PacketDecoder`, and a dispatcher handing each packet to its handler (`connect.ts`,
 * `connection_publisher.ts`, `subscribe.ts`, `control.ts`). Handlers return outcomes that
 * `wire.ts` `act()` turns into wire actions; PUBACKs and PUBRECs go from the publisher's
 * `AckQueue` straight into the outbox (the fast path allocates no outcome). Its life (start,
 * CONNECT accepted, close, drain) is `connection_lifecycle.ts`.
 *
 * @module
 */
import { ProtocolError } from "../codec/errors.ts";
import type { ClientPacket } from "../codec/packets.ts";
import { handleConnect } from "./connect.ts";
import { handleDisconnect, handlePingreq, handleUnsupportedConnect } from "./control.ts";
import { isAck } from "./delivery_port.ts";
import { countReadError } from "./decoder_of.ts";
import { ConnectionPublisher, readGate } from "./connection_publisher.ts";
import { ConnectionLifecycle } from "./connection_lifecycle.ts";
import { handleSubscribe, handleUnsubscribe } from "./subscribe.ts";
import { closeQuietly, type TransportSink } from "./transport.ts";
import { act } from "./wire.ts";

/** Shared empty packet list: an idle connection holds none of its own. */
const NO_PACKETS: ClientPacket[] = [];

/** One client connection. */
export class Connection extends ConnectionLifecycle implements TransportSink {
  /** Packets of the current read and the next one to handle. */
  #packets: ClientPacket[] = NO_PACKETS;
  #next = 0;
  #backlog: Uint8Array[] | null = null; // reads that arrived while paused (rare; copies)
  /** A step is waiting (reads are paused until it settles). */
  #busy = false;
  #paused = false;
  /** The transport ended; close once the current packets are handled. */
  #eof = false;

  /** The transport pushes reads into {@link data} from now on. */
  protected listen(): void {
    this.transport.start(this);
  }

  /**
   * A read arrived (TransportSink): decode it and handle its packets in order. Synchronous
   * while nothing must wait; when a packet must (CONNECT authentication, a metadata lookup,
   * SUBSCRIBE) or the read gate is shut, the transport is paused and the rest of the packets
   * wait here. An idle connection thus holds no promise at all (memory per connection).
   */
  data(chunk: Uint8Array): void {
    if (this.isClosed) return;
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
    if (this.isClosed) return closeQuietly(this.transport); // the peer ended a linger
    if (error !== undefined) this.#onError(error);
    this.#eof = true;
    if (!this.#busy) this.#finish();
  }

  #decode(chunk: Uint8Array): void {
    try {
      // Before CONNECT, bytes do not extend the deadline: connect_timeout_ms runs from
      // accept to a complete CONNECT, however slowly it trickles in (slowloris).
      if (this.connectedAs !== null) this.lastActivity = this.ctx.clock.now();
      this.ctx.metrics.bytesIn.inc({}, chunk.length);
      this.#packets = this.decoder.push(chunk);
      this.#next = 0;
    } catch (err) {
      this.#onError(err);
      this.#packets = NO_PACKETS;
      this.#next = 0;
      this.publisher?.flush();
      if (err instanceof ProtocolError) {
        this.disconnect(err.reasonCode, err.reason, err.inV5Connect);
      }
      this.#finish();
    }
  }

  /** Handles packets until one must wait, then the read gate; re-entered when it settles. */
  #drain(): void {
    const ctx = this.ctx;
    if (this.isClosed) return;
    try {
      for (;;) {
        while (this.#next < this.#packets.length) {
          if (this.isClosed) return;
          const p = this.#packets[this.#next++];
          // Draining (stop, DISCONNECT, refused CONNECT): no new work, but PUBACKs (and
          // PUBRECs) still settle deliveries, so acknowledged copies are not redelivered.
          if (this.draining) {
            if (this.connectedAs !== null && isAck(p)) ctx.delivery.acknowledged(this, p);
            continue;
          }
          const pending = this.#handle(p);
          if (pending !== undefined) return this.#waitFor(pending);
        }
        this.#packets = NO_PACKETS;
        this.#next = 0;
        this.publisher?.flush();
        // A client that sends but never reads (PINGREQ or QoS 1 floods) would grow its
        // outbox without bound: past twice the per-client cap it is closed.
        if (this.outbox.queuedBytes > 2 * ctx.config.limits.max_outbound_queue_bytes_per_client) {
          ctx.metrics.evictions.inc();
          return this.disconnect(0x97, "client does not read its socket: outbound queue hard cap");
        }
        const backlog = this.#backlog;
        if (backlog === null || backlog.length === 0) break;
        this.#decode(backlog.shift()!);
        if (this.isClosed) return;
      }
      if (this.#eof) return this.#finish();
      const gate = this.#readGate();
      if (gate !== undefined) return this.#waitFor(gate);
      if (this.#paused) {
        this.#paused = false;
        this.transport.resume();
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
    this.transport.pause();
  }

  /** The read side is over: append what this read produced, then close. */
  #finish(): void {
    this.publisher?.flush();
    this.close("connection ended");
  }

  /** Back-pressure before each read (see {@link readGate}). */
  #readGate(): Promise<void> | undefined {
    if (this.isClosed) return undefined;
    return readGate(this.ctx, this.publisher)?.then(() => this.#readGate());
  }

  #onError(err: unknown): void {
    countReadError(this.ctx, err, this.connectedAs, this.transport.remoteAddress, this.isClosed);
  }

  /** The dispatcher: a promise only when the next packet must wait (PUBLISH, PUBACK: none). */
  #handle(p: ClientPacket): Promise<void> | undefined {
    const ctx = this.ctx;
    switch (p.type) {
      case "publish":
        this.messagesIn++;
        return (this.publisher ??= this.#newPublisher()).publish(p);
      case "puback":
        ctx.delivery.puback(this, p.packetId);
        return;
      case "pubrec":
      case "pubcomp":
        ctx.delivery.acknowledged(this, p);
        return;
      case "pubrel":
        return (this.publisher ??= this.#newPublisher()).release(p.packetId);
      case "connect":
        return handleConnect(ctx, p, this).then((r) => this.connected(r));
      case "connect_unsupported":
        return act(this.ctx, this, handleUnsupportedConnect(p));
      case "subscribe":
        return handleSubscribe(ctx, this, p).then((o) => act(this.ctx, this, o));
      case "unsubscribe": {
        const unsuback = handleUnsubscribe(ctx, this, p, this.speaks5);
        if (this.session === null) return act(ctx, this, unsuback);
        // As a SUBACK does: a power cut after the UNSUBACK must not bring the filters back.
        return ctx.sessions.records.written().then(() => act(ctx, this, unsuback));
      }
      case "pingreq":
        return act(this.ctx, this, handlePingreq());
      case "disconnect":
        return act(ctx, this, handleDisconnect(p, this.session, ctx.config.session.max_expiry_s));
    }
  }

  #newPublisher(): ConnectionPublisher {
    return new ConnectionPublisher(this.ctx, this, this.principal, this.connectedAs!);
  }
}

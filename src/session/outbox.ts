/**
 * A connection's outbound byte queue. Packets pushed during one run of JavaScript (the packets
 * of one read, the deliveries of one commit, the PUBACKs of one fsync) are written together in
 * one `write`, in a microtask queued by the first of them (one microtask for every outbox pushed to
 * in that run): every socket write has a fixed cost however small it is, so coalescing matters,
 * and a microtask keeps a lone delivery from waiting for the next turn of the event loop.
 *
 * Bytes queued here count against the client's and the global outbound caps; a client whose
 * socket does not drain keeps its bytes here, which is how slow consumers are detected.
 *
 * @module
 */
import { concatBytes } from "../base/bytes.ts";
import type { OutboundTopicAliases } from "../codec/topic_alias_out.ts";
import type { Transport } from "./transport.ts";

/** Shared byte accounting across every outbox (the global cap), and the bytes-out counter. */
export class OutboundBudget {
  bytes = 0;
  constructor(
    readonly maxBytes: number,
    /** Counts bytes written by any outbox (metrics). */
    readonly countWritten: (n: number) => void = NOOP,
  ) {}
}

/** Who is told when an outbox's write fails (the connection closes itself). */
export interface OutboxOwner {
  close(reason: string): void;
}

function NOOP(): void {}

const NO_OWNER: OutboxOwner = { close: NOOP };

/**
 * Bytes of a PUBACK staging block: 128 PUBACKs. A 4-byte array per PUBACK is a visible share
 * of the gateway's CPU under QoS 1 (and garbage); a block is cut into views instead. One block
 * serves every outbox (filled front to back, never written twice, a new one when full): a block
 * per outbox stayed with each QoS 1 connection while it idled, and memory per idle connection
 * is a benchmark floor.
 */
const ACK_BLOCK_BYTES = 512;

let ackBlock = new Uint8Array(ACK_BLOCK_BYTES);
let ackBlockUsed = 0;

/** Coalescing writer for one connection. */
export class Outbox {
  #transport: Transport;
  #pending: Uint8Array[] = [];
  #pendingBytes = 0;
  #inWriteBytes = 0;
  #scheduled = false;
  #writing = false;
  #closed = false;
  #budget: OutboundBudget;
  #drainWaiters: (() => void)[] | null = null;
  readonly #owner: OutboxOwner;
  /**
   * 4-byte acks written in place and not yet queued: the shared block they are in (null when
   * none), their start and end.
   */
  #acks: Uint8Array | null = null;
  #acksEnd = 0;
  #acksFrom = 0;
  /** Called after bytes were written (the queue shrank); set for subscribers. */
  onWritten: () => void = NOOP;
  /** Bytes written in total (metrics). */
  written = 0;
  /** PUBLISH packets queued to the client in total (the admin client listing). */
  published = 0;
  /** MQTT 5 topic aliases toward the client, when it allowed them; null: full topics. */
  aliases: OutboundTopicAliases | null = null;

  /**
   * @param owner closed ("write failed") when a write fails. No closures per outbox: memory
   *   per idle connection is a benchmark floor.
   */
  constructor(transport: Transport, budget: OutboundBudget, owner: OutboxOwner = NO_OWNER) {
    this.#transport = transport;
    this.#budget = budget;
    this.#owner = owner;
  }

  /** Bytes queued or being written. */
  get queuedBytes(): number {
    return this.#pendingBytes + this.#inWriteBytes;
  }

  /** Queues bytes for the next write. Ignored after close. */
  push(bytes: Uint8Array): void {
    if (this.#closed) return;
    this.#queueAcks(); // PUBACKs staged before these bytes leave before them
    // In queue order, which is write order: the client learns an alias before its bare use.
    if ((bytes[0] & 0xf0) === 0x30) {
      this.published++;
      if (this.aliases !== null) bytes = this.aliases.apply(bytes);
    }
    this.#pending.push(bytes);
    this.#queued(bytes.length);
  }

  /**
   * Queues a 4-byte acknowledgement (MQTT 5: reason 0x00, no properties) of first byte `type`:
   * PUBACK 0x40, PUBREC 0x50, PUBREL 0x62 or PUBCOMP 0x70 (`AckType`).
   */
  pushAck(packetId: number, type = 0x40): void {
    if (this.#closed) return;
    let block = ackBlock;
    let at = ackBlockUsed;
    if (at + 4 > block.length) {
      // A fresh block: views of the old one may still be queued or being written.
      block = ackBlock = new Uint8Array(ACK_BLOCK_BYTES);
      at = 0;
    }
    // The staged acks grow by this one only when it comes right after them in the same block
    // (no other outbox staged one in between); else they are queued and this one starts anew.
    if (this.#acks !== block || this.#acksEnd !== at) {
      this.#queueAcks();
      this.#acks = block;
      this.#acksFrom = at;
    }
    block[at] = type;
    block[at + 1] = 2;
    block[at + 2] = packetId >> 8;
    block[at + 3] = packetId & 0xff;
    this.#acksEnd = ackBlockUsed = at + 4;
    this.#queued(4);
  }

  /** Moves the staged PUBACKs into the queue as one view; the outbox keeps no block. */
  #queueAcks(): void {
    const block = this.#acks;
    if (block === null) return;
    this.#pending.push(block.subarray(this.#acksFrom, this.#acksEnd));
    this.#acks = null;
  }

  #queued(n: number): void {
    this.#pendingBytes += n;
    this.#budget.bytes += n;
    if (!this.#scheduled && !this.#writing) {
      this.#scheduled = true;
      if (Outbox.#due.push(this) === 1) queueMicrotask(Outbox.#flushDue);
    }
  }

  /**
   * Outboxes with bytes queued in this run of JavaScript: one microtask flushes them all (a
   * commit's deliveries to many subscribers), with no closure per flush.
   */
  static #due: Outbox[] = [];

  static #flushDue(): void {
    const due = Outbox.#due;
    Outbox.#due = [];
    for (const o of due) void o.#flush();
  }

  /** Resolves when everything queued so far has been written (or the outbox closed). */
  drained(): Promise<void> {
    if (this.queuedBytes === 0 || this.#closed) return Promise.resolve();
    return new Promise((r) => (this.#drainWaiters ??= []).push(r));
  }

  /** Drops what is queued and stops writing. The transport is closed by the owner. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#budget.bytes -= this.#pendingBytes + this.#inWriteBytes;
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#inWriteBytes = 0;
    this.#acks = null;
    this.#acksEnd = this.#acksFrom = 0;
    this.#wakeDrainWaiters();
  }

  async #flush(): Promise<void> {
    this.#scheduled = false;
    if (this.#writing || this.#closed) return;
    this.#writing = true;
    try {
      for (;;) {
        this.#queueAcks();
        if (this.#pending.length === 0 || this.#closed) break;
        const chunk = concatBytes(this.#pending, this.#pendingBytes);
        this.#inWriteBytes = this.#pendingBytes;
        this.#pending = [];
        this.#pendingBytes = 0;
        // Awaited directly, looping only over a partial write (node:net writes it all).
        let done = await this.#transport.write(chunk);
        while (done < chunk.length) done += await this.#transport.write(chunk.subarray(done));
        if (this.#closed) break;
        this.#budget.bytes -= this.#inWriteBytes;
        this.written += this.#inWriteBytes;
        this.#budget.countWritten(this.#inWriteBytes);
        this.#inWriteBytes = 0;
        this.onWritten();
      }
    } catch {
      if (!this.#closed) this.#owner.close("write failed");
    } finally {
      this.#writing = false;
      if (this.queuedBytes === 0 || this.#closed) this.#wakeDrainWaiters();
    }
  }

  #wakeDrainWaiters(): void {
    const w = this.#drainWaiters;
    if (w === null) return;
    this.#drainWaiters = null;
    for (const r of w) r();
  }
}

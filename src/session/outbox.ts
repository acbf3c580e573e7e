/**
 * A connection's outbound byte queue. Packets pushed during a tick are written together in
 * one `write` (DESIGN §5: a small socket write costs ~10 µs, so coalescing matters).
 *
 * Bytes queued here count against the client's and the global outbound caps; a client whose
 * socket does not drain keeps its bytes here, which is how slow consumers are detected.
 *
 * @module
 */
import { concatBytes } from "../base/bytes.ts";
import { nextTick } from "../base/tick.ts";
import { type Transport, writeAll } from "./transport.ts";

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
  /** Called after bytes were written (the queue shrank); set for subscribers. */
  onWritten: () => void = NOOP;
  /** Bytes written in total (metrics). */
  written = 0;

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
    this.#pending.push(bytes);
    this.#pendingBytes += bytes.length;
    this.#budget.bytes += bytes.length;
    if (!this.#scheduled && !this.#writing) {
      this.#scheduled = true;
      nextTick(() => this.#flush());
    }
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
    this.#wakeDrainWaiters();
  }

  async #flush(): Promise<void> {
    this.#scheduled = false;
    if (this.#writing || this.#closed) return;
    this.#writing = true;
    try {
      while (this.#pending.length > 0 && !this.#closed) {
        const chunk = concatBytes(this.#pending, this.#pendingBytes);
        this.#inWriteBytes = this.#pendingBytes;
        this.#pending = [];
        this.#pendingBytes = 0;
        await writeAll(this.#transport, chunk);
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

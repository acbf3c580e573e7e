/**
 * Coalesces concurrent appends to one partition into one SEND_MESSAGES. Per
 * (stream, topic, partition) one send is in flight at a time, which keeps the partition's
 * order; appends arriving meanwhile wait and go out together in the next send, bounded by
 * `batch_max_messages` and `batch_max_bytes` (an append larger than a bound goes alone,
 * whole). A new batch waits at most `batch_linger_ms` for company. Each append resolves
 * when its send is confirmed, with its own first offset; a failed send rejects every
 * append in it (nothing is resent behind the caller's back).
 *
 * @module
 */

import type { AppendReceipt, PartitionAddress } from "../port.ts";

/**
 * Sends messages to one partition; resolves with the first offset (null if unknown). `bytes`
 * is the sum of their `sizeOf`.
 */
export type SendFn<M> = (
  address: PartitionAddress,
  messages: readonly M[],
  bytes: number,
) => Promise<number | null>;

/** Bounds of one send. */
export interface BatcherOptions {
  readonly maxMessages: number;
  readonly maxBytes: number;
  readonly lingerMs: number;
}

interface Entry<M> {
  readonly messages: readonly M[];
  readonly bytes: number;
  resolve(r: AppendReceipt): void;
  reject(e: unknown): void;
}

interface Lane<M> {
  readonly address: PartitionAddress;
  readonly queue: Entry<M>[];
  bytes: number;
  messages: number;
  sending: boolean;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/** The append batcher, over messages of type `M` whose wire size `sizeOf` tells. */
export class AppendBatcher<M> {
  readonly #send: SendFn<M>;
  readonly #sizeOf: (m: M) => number;
  readonly #o: BatcherOptions;
  readonly #lanes = new Map<string, Lane<M>>();
  readonly #idle = new Set<() => void>();

  constructor(send: SendFn<M>, sizeOf: (m: M) => number, options: BatcherOptions) {
    this.#send = send;
    this.#sizeOf = sizeOf;
    this.#o = options;
  }

  /** Queues an append; resolves when the send carrying it is confirmed. */
  append(
    request: PartitionAddress & { readonly messages: readonly M[] },
  ): Promise<AppendReceipt> {
    const key = JSON.stringify([request.stream, request.topic, request.partition]);
    let lane = this.#lanes.get(key);
    if (!lane) {
      const { stream, topic, partition } = request;
      lane = {
        address: { stream, topic, partition },
        queue: [],
        bytes: 0,
        messages: 0,
        sending: false,
        timer: undefined,
      };
      this.#lanes.set(key, lane);
    }
    const bytes = request.messages.reduce((n, m) => n + this.#sizeOf(m), 0);
    const l = lane;
    return new Promise<AppendReceipt>((resolve, reject) => {
      l.queue.push({ messages: request.messages, bytes, resolve, reject });
      l.bytes += bytes;
      l.messages += request.messages.length;
      this.#schedule(key, l);
    });
  }

  #schedule(key: string, lane: Lane<M>): void {
    if (lane.sending) return; // the running send drains the queue when it ends
    const full = lane.messages >= this.#o.maxMessages || lane.bytes >= this.#o.maxBytes;
    if (full || this.#o.lingerMs <= 0) {
      clearTimeout(lane.timer);
      lane.timer = undefined;
      lane.sending = true;
      // a microtask lets same-tick appends join this send
      queueMicrotask(() => this.#drain(key, lane));
    } else {
      lane.timer ??= setTimeout(() => {
        lane.timer = undefined;
        if (!lane.sending) {
          lane.sending = true;
          this.#drain(key, lane);
        }
      }, this.#o.lingerMs);
    }
  }

  #take(lane: Lane<M>): Entry<M>[] {
    const taken: Entry<M>[] = [];
    let count = 0;
    let bytes = 0;
    while (lane.queue.length > 0) {
      const e = lane.queue[0];
      const over = count + e.messages.length > this.#o.maxMessages ||
        bytes + e.bytes > this.#o.maxBytes;
      if (taken.length > 0 && over) break;
      taken.push(lane.queue.shift()!);
      count += e.messages.length;
      bytes += e.bytes;
    }
    lane.messages -= count;
    lane.bytes -= bytes;
    return taken;
  }

  async #drain(key: string, lane: Lane<M>): Promise<void> {
    while (lane.queue.length > 0) {
      const entries = this.#take(lane);
      const messages = entries.flatMap((e) => e.messages);
      let bytes = 0;
      for (const e of entries) bytes += e.bytes;
      try {
        const base = await this.#send(lane.address, messages, bytes);
        let at = 0;
        for (const e of entries) {
          e.resolve({ baseOffset: base === null ? null : base + at });
          at += e.messages.length;
        }
      } catch (err) {
        for (const e of entries) e.reject(err);
      }
    }
    lane.sending = false;
    if (lane.timer === undefined && lane.queue.length === 0) this.#lanes.delete(key);
    if (this.#lanes.size === 0) { for (const wake of [...this.#idle]) wake(); }
  }

  /** Sends everything queued now and resolves when no send is pending. */
  async flush(): Promise<void> {
    for (const [key, lane] of this.#lanes) {
      if (lane.timer !== undefined && !lane.sending) {
        clearTimeout(lane.timer);
        lane.timer = undefined;
        lane.sending = true;
        this.#drain(key, lane);
      }
    }
    if (this.#lanes.size === 0) return;
    await new Promise<void>((resolve) => {
      const wake = () => {
        this.#idle.delete(wake);
        resolve();
      };
      this.#idle.add(wake);
    });
  }
}

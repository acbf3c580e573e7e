/**
 * Coalesces concurrent appends to one partition into one SEND_MESSAGES. Per
 * (stream, topic, partition) one send is in flight at a time, which keeps the partition's
 * order; appends arriving meanwhile wait and go out together in the next send, bounded by
 * `batch_max_messages` and `batch_max_bytes` (an append larger than a bound goes alone,
 * whole). A new batch waits at most `batch_linger_ms` for company. Each append resolves
 * when its send is confirmed, with its own first offset; a failed send rejects every
 * append in it (nothing is resent behind the caller's back).
 *
 * Unkeyed appends (`balancedOver`) of a topic share one lane whatever partition they name:
 * each send of that lane goes to the next partition in turn. So a topic's unkeyed messages
 * are one send at a time carrying all that gathered during the previous one, rather than
 * one small send per partition — Iggy persists (and with fsync, syncs) a topic's sends one
 * after another, so the small sends cost nearly as much each as the one big one. Only when a
 * full batch waits behind the running send (a flood) does a second start, to a partition with
 * none in flight, up to `maxParallel`: large writes do overlap in Iggy.
 *
 * After a confirmed send a balanced lane may wait, at most about one send's time, for the
 * round that send confirmed to come back (the devices' next messages, once PUBACKed), so
 * that one send carries a closed loop's whole in-flight window instead of half of it; its
 * `RoundGauge` (`round_gauge.ts`) measures whether that confirms more messages per
 * millisecond, which holds where a send costs Iggy the same whatever it carries (fsync
 * topics). `flush()` ends such waits.
 *
 * @module
 */

import type { AppendReceipt, PartitionAddress } from "../port.ts";
import { RoundGauge } from "./round_gauge.ts";

/** Gauges kept for balanced lanes (one per topic written to unkeyed), the least recent dropped. */
export const MAX_GAUGES = 1024;

/**
 * Sends messages to one partition; resolves with the first offset (null if unknown). `bytes`
 * is the sum of their `sizeOf`.
 */
export type SendFn<M> = (
  address: PartitionAddress,
  messages: readonly M[],
  bytes: number,
  count: number,
) => Promise<number | null>;

/** Bounds of one send. */
export interface BatcherOptions {
  readonly maxMessages: number;
  readonly maxBytes: number;
  readonly lingerMs: number;
  /**
   * Sends of one balanced lane in flight at once, each to a partition with none in flight
   * (default 1). A second starts only when a full batch waits: a flood (QoS 0) gets
   * parallel sends, a closed loop (QoS 1) keeps whole batches.
   */
  readonly maxParallel?: number;
  /** Makes a balanced lane's gauge (tests; default a {@link RoundGauge}). */
  readonly gauge?: () => LaneGauge;
}

/** What a balanced lane tells its gauge, and asks it (`round_gauge.ts`). */
export interface LaneGauge {
  sent(count: number, ms: number, now: number): void;
  arrived(count: number, now: number): void;
  waitMs(): number;
}

interface Entry<M> {
  /** Null once taken for a send: the send's own list holds them until encoded. */
  messages: readonly M[] | null;
  /** How many messages it holds (its offsets follow the previous entry's in the send). */
  readonly count: number;
  readonly bytes: number;
  resolve(r: AppendReceipt): void;
  reject(e: unknown): void;
}

/** A drain loop waiting for the round: `end` when `target` messages are queued, or at the timer. */
interface Gather {
  readonly target: number;
  readonly waiting: Promise<void>;
  end(): void;
}

interface Lane<M> {
  /** For a balanced lane, partition 0's; the send goes to `turn`'s partition instead. */
  readonly address: PartitionAddress;
  /** Partitions a balanced lane rotates over (0 = a plain partition lane). */
  balancedOver: number;
  turn: number;
  /** A balanced lane's address per partition, made once. */
  readonly turns: PartitionAddress[];
  readonly queue: Entry<M>[];
  bytes: number;
  messages: number;
  /** Drain loops running (at most 1 for a partition lane). */
  senders: number;
  /** A balanced lane's send and round times (`round_gauge.ts`). */
  readonly gauge: LaneGauge | undefined;
  /** While a drain loop waits for the round: how many messages end the wait, and the end. */
  gather: Gather | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/** The append batcher, over messages of type `M` whose wire size `sizeOf` tells. */
export class AppendBatcher<M> {
  readonly #send: SendFn<M>;
  readonly #sizeOf: (m: M) => number;
  readonly #o: BatcherOptions;
  readonly #lanes = new Map<string, Lane<M>>();
  readonly #idle = new Set<() => void>();
  /** flush() calls waiting. */
  #flushing = 0;
  /**
   * Partitions with a send in flight, from any lane, and when it ends. Keyed and unkeyed
   * messages of one topic have separate lanes that can target the same partition: two sends
   * in flight there would reorder, and on 0.12 carry the same producer sequence (the second
   * taken for a resend of the first and dropped).
   */
  readonly #sending = new Map<string, Promise<void>>();
  /**
   * Balanced lanes' gauges, which outlive the lanes (a lane ends whenever its queue runs dry),
   * most recently used last, at most {@link MAX_GAUGES}.
   */
  readonly #gauges = new Map<string, LaneGauge>();

  constructor(send: SendFn<M>, sizeOf: (m: M) => number, options: BatcherOptions) {
    this.#send = send;
    this.#sizeOf = sizeOf;
    this.#o = options;
  }

  /** Queues an append; resolves when the send carrying it is confirmed. */
  append(
    request: PartitionAddress & {
      readonly messages: readonly M[];
      readonly balancedOver?: number;
      /** Messages the items hold, when one item can hold several (default: one each). */
      readonly count?: number;
    },
  ): Promise<AppendReceipt> {
    // Sized first: a size that throws (a message the encoder refuses) leaves no lane behind.
    let bytes = 0;
    for (const m of request.messages) bytes += this.#sizeOf(m);
    const over = request.balancedOver ?? 0;
    const key = laneKey(request.stream, request.topic, over > 0 ? "balanced" : request.partition);
    let lane = this.#lanes.get(key);
    if (!lane) {
      const { stream, topic } = request;
      lane = {
        address: { stream, topic, partition: over > 0 ? 0 : request.partition },
        balancedOver: over,
        // A random first turn: gateways sharing a topic do not all start at partition 0.
        turn: over > 0 ? Math.floor(Math.random() * over) : 0,
        turns: [],
        queue: [],
        bytes: 0,
        messages: 0,
        senders: 0,
        gauge: over > 0 ? this.#gauge(key) : undefined,
        gather: undefined,
        timer: undefined,
      };
      this.#lanes.set(key, lane);
    }
    if (over > 0) lane.balancedOver = over; // the topic's latest partition count
    const count = request.count ?? request.messages.length;
    lane.gauge?.arrived(count, performance.now());
    const l = lane;
    return new Promise<AppendReceipt>((resolve, reject) => {
      l.queue.push({ messages: request.messages, count, bytes, resolve, reject });
      l.bytes += bytes;
      l.messages += count;
      this.#schedule(key, l);
    });
  }

  #schedule(key: string, lane: Lane<M>): void {
    const full = lane.messages >= this.#o.maxMessages || lane.bytes >= this.#o.maxBytes;
    if (lane.gather && (full || lane.messages >= lane.gather.target)) lane.gather.end();
    if (lane.senders > 0) {
      // The running sends drain the queue; a balanced lane under a flood adds one.
      const parallel = Math.min(this.#o.maxParallel ?? 1, lane.balancedOver);
      if (full && lane.senders < parallel) this.#start(key, lane, false);
      return;
    }
    if (full || this.#o.lingerMs <= 0) {
      clearTimeout(lane.timer);
      lane.timer = undefined;
      this.#start(key, lane, true);
    } else {
      lane.timer ??= setTimeout(() => {
        lane.timer = undefined;
        if (lane.senders === 0) this.#start(key, lane, false);
      }, this.#o.lingerMs);
    }
  }

  #gauge(key: string): LaneGauge {
    const gauge = this.#gauges.get(key) ?? this.#o.gauge?.() ?? new RoundGauge();
    this.#gauges.delete(key);
    this.#gauges.set(key, gauge);
    if (this.#gauges.size > MAX_GAUGES) this.#gauges.delete(this.#gauges.keys().next().value!);
    return gauge;
  }

  /** Starts a drain loop; `later`: after a microtask, so same-tick appends join its send. */
  #start(key: string, lane: Lane<M>, later: boolean): void {
    lane.senders++;
    if (later) queueMicrotask(() => this.#drain(key, lane));
    else this.#drain(key, lane);
  }

  /** The next send's entries, with their summed message count and bytes. */
  #take(lane: Lane<M>): { entries: Entry<M>[]; count: number; bytes: number } {
    const taken: Entry<M>[] = [];
    let count = 0;
    let bytes = 0;
    while (lane.queue.length > 0) {
      const e = lane.queue[0];
      const over = count + e.count > this.#o.maxMessages ||
        bytes + e.bytes > this.#o.maxBytes;
      if (taken.length > 0 && over) break;
      taken.push(lane.queue.shift()!);
      count += e.count;
      bytes += e.bytes;
    }
    lane.messages -= count;
    lane.bytes -= bytes;
    return { entries: taken, count, bytes };
  }

  async #drain(key: string, lane: Lane<M>): Promise<void> {
    while (lane.queue.length > 0) {
      const { entries, count, bytes } = this.#take(lane);
      const address = this.#target(lane);
      try {
        const left = performance.now();
        const base = await this.#exclusive(address, entries, bytes, count);
        if (lane.gauge) this.#confirmed(lane, count, left);
        let at = 0;
        const balanced = lane.balancedOver > 0;
        for (const e of entries) {
          const baseOffset = base === null ? null : base + at;
          e.resolve(balanced ? { baseOffset, partition: address.partition } : { baseOffset });
          at += e.count;
        }
      } catch (err) {
        for (const e of entries) e.reject(err);
      }
      if (lane.gather) await lane.gather.waiting;
    }
    lane.senders--;
    const done = lane.senders === 0 && lane.timer === undefined && lane.queue.length === 0;
    if (done) this.#lanes.delete(key);
    if (this.#lanes.size === 0) { for (const wake of [...this.#idle]) wake(); }
  }

  /**
   * Notes a balanced lane's confirmed send in its gauge and, when the gauge says the round
   * comes back quicker than a send takes, makes the loop wait for it: until the queue holds
   * what it holds now plus the round (the messages just confirmed), or the gauge's time.
   */
  #confirmed(lane: Lane<M>, count: number, left: number): void {
    const now = performance.now();
    lane.gauge!.sent(count, now - left, now);
    const waitMs = lane.gauge!.waitMs();
    const target = Math.min(lane.messages + count, this.#o.maxMessages);
    if (waitMs <= 0 || lane.messages >= target || this.#flushing > 0) return;
    const { promise, resolve } = Promise.withResolvers<void>();
    const timer = setTimeout(() => gather.end(), waitMs);
    const gather: Gather = {
      target,
      waiting: promise,
      end() {
        clearTimeout(timer);
        if (lane.gather === gather) lane.gather = undefined;
        resolve();
      },
    };
    lane.gather = gather;
  }

  /**
   * Where a lane's next send goes: its partition, or a balanced lane's next turn with no send
   * in flight (from any lane; if every partition has one, the turn's, which then waits).
   */
  #target(lane: Lane<M>): PartitionAddress {
    if (lane.balancedOver === 0) return lane.address;
    const { stream, topic } = lane.address;
    let partition = lane.turn % lane.balancedOver;
    for (let i = 0; i < lane.balancedOver; i++) {
      const p = (lane.turn + i) % lane.balancedOver;
      if (!this.#sending.has(partitionKey(stream, topic, p))) {
        partition = p;
        break;
      }
    }
    lane.turn = partition + 1;
    return lane.turns[partition] ??= { stream, topic, partition };
  }

  /**
   * Sends the entries' messages once no other send to `a`'s partition is in flight. The
   * messages are gathered into the send's list only then, and the entries let go of theirs:
   * from the send on, nothing here holds a message (a send function that encodes at once lets
   * them die young, not after the round trip).
   */
  async #exclusive(
    a: PartitionAddress,
    entries: Entry<M>[],
    bytes: number,
    count: number,
  ): Promise<number | null> {
    const key = partitionKey(a.stream, a.topic, a.partition);
    for (let running = this.#sending.get(key); running; running = this.#sending.get(key)) {
      await running;
    }
    const done = Promise.withResolvers<void>();
    this.#sending.set(key, done.promise);
    try {
      return await this.#send(a, takeMessages(entries), bytes, count);
    } finally {
      this.#sending.delete(key);
      done.resolve();
    }
  }

  /** Sends everything queued now, waiting for no round, and resolves when no send is pending. */
  async flush(): Promise<void> {
    for (const [key, lane] of this.#lanes) {
      lane.gather?.end();
      if (lane.timer !== undefined && lane.senders === 0) {
        clearTimeout(lane.timer);
        lane.timer = undefined;
        this.#start(key, lane, false);
      }
    }
    if (this.#lanes.size === 0) return;
    this.#flushing++; // and no new waits for a round until it is done
    try {
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.#idle.delete(wake);
          resolve();
        };
        this.#idle.add(wake);
      });
    } finally {
      this.#flushing--;
    }
  }
}

/** The entries' messages in one list, each entry's reference dropped. */
function takeMessages<M>(entries: Entry<M>[]): readonly M[] {
  if (entries.length === 1) {
    const only = entries[0].messages!;
    entries[0].messages = null;
    return only;
  }
  const all: M[] = [];
  for (const e of entries) {
    for (const m of e.messages!) all.push(m);
    e.messages = null;
  }
  return all;
}

/**
 * A lane's key, without a JSON encoding per append: the stream's length keeps stream and
 * topic apart, and the last NUL separates topic and suffix (the suffix holds none), whatever
 * the names hold.
 */
function laneKey(stream: string, topic: string, lane: number | "balanced"): string {
  return `${stream.length}:${stream}${topic}\u0000${lane}`;
}

function partitionKey(stream: string, topic: string, partition: number): string {
  return `${stream}\u0000${topic}\u0000${partition}`;
}

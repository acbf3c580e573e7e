/**
 * One local partition's forwarding: reads the local log from the forwarded position, sends
 * in batches to the upstream partition, one send in flight, and stores the position only
 * after the upstream confirmed. After any failed send, and at start, it first resolves what
 * landed: it reads the upstream partition from its mark (an upstream offset before anything
 * of its own that is not yet confirmed) and skips every message whose origin header says it
 * is already there. So nothing is sent twice and nothing is skipped, whichever side crashed.
 *
 * @module
 */
import type { CopyStamp, EncodedMessages, LogBackend, PartitionAddress } from "../log/port.ts";
import type { LocalLog } from "../log/local_log.ts";
import { BacklogBytes } from "./backlog_bytes.ts";
import { originOffset, originStamp } from "./origin.ts";
import { type ForwardCounters, meanSentBytes } from "./counters.ts";
import type { ForwarderOptions } from "./options.ts";
import { settled } from "../base/settled.ts";

/** Consumer whose stored offset (local catalog) is the last forwarded message of a partition. */
export const FORWARD_CONSUMER = "mqtt-forward";
/** Consumer whose stored "offset" is the partition's upstream mark. */
export const MARK_CONSUMER = "mqtt-forward-mark";

/** Sends between two moves of the stored mark; messages read per upstream poll when resolving. */
const MARK = { everySends: 16, resolvePoll: 1_000 } as const;

/** The local log the forwarder reads: the log on this machine, which hands out messages encoded. */
export type ForwardSource = LocalLog;
/** The upstream the forwarder writes (encoded messages, `appendEncoded`). */
export type ForwardTarget = LogBackend;

/** What a lane needs from its forwarder. */
export interface LaneContext {
  readonly local: ForwardSource;
  readonly options: ForwarderOptions;
  readonly counters: ForwardCounters;
  /** The open upstream, waiting for it while the uplink is down; null once stopping. */
  uplink(): Promise<ForwardTarget | null>;
  /** The upstream if it is open now (no wait). */
  openUplink(): ForwardTarget | null;
  /** The upstream topic's partition count, creating the topic when missing. */
  upstreamPartitions(upstream: ForwardTarget, stream: string, topic: string): Promise<number>;
  /** Resolves after the linger (a lane with less than a full send ready sends then). */
  linger(): Promise<void>;
  /** Resolves after the back-off for the n-th failure in a row. */
  backOff(failures: number): Promise<void>;
  /** A send or read upstream failed: the uplink may be down. */
  failed(e: unknown, where: PartitionAddress): void;
  /** A send or read upstream succeeded: the uplink is up. */
  reached(): void;
  readonly stopping: () => boolean;
  /** Resolves when the forwarder stops. */
  readonly stopped: Promise<void>;
}

/** The forwarding of one local partition. */
export class ForwardLane {
  readonly address: PartitionAddress;
  readonly #ctx: LaneContext;
  readonly #stamp: CopyStamp;
  /** Next local offset to forward. */
  #next = 0;
  /** Upstream offset from which a resolve reads; null until first known. */
  #mark: number | null = null;
  #resolved = false;
  #sendsSinceMark = 0;
  /** The forwarded position last stored in the local catalog (-1: none). */
  #storedPosition = -1;
  /** The local partition's next offset as last seen. */
  #localEnd = 0;
  /** The local partition's next offset as the log last told it ({@link grew}). */
  #grownTo = 0;
  /** Wakes the lane that waits for the local partition to grow. */
  #wake: (() => void) | undefined;
  /** The bytes still to send. */
  readonly #backlog = new BacklogBytes();
  /** Append time (µs) of the oldest unforwarded message, while there is one. */
  #oldestMicros: number | null = null;
  #run: Promise<void> | undefined;
  /** The last send failed: the next one resends (what the resolve did not find upstream). */
  #resending = false;
  /** The lane waited a linger since its last send: what is ready now goes, full or not. */
  #lingered = false;
  /** A send is under way (it may wait long for a connection that is gone). */
  #sending = false;

  constructor(address: PartitionAddress, ctx: LaneContext) {
    this.address = address;
    this.#ctx = ctx;
    this.#stamp = originStamp(ctx.options.gatewayId, address.partition);
  }

  /** Messages appended locally and not yet confirmed upstream (as last seen). */
  get lagMessages(): number {
    return Math.max(0, this.#localEnd - this.#next);
  }

  /** Bytes of the records still to send (payloads and encoded headers), as last seen. */
  get lagBytes(): number {
    return this.lagMessages === 0 ? 0 : this.#backlog.bytes;
  }

  /** Append time (µs) of the oldest unforwarded message, or null when caught up. */
  get oldestUnforwardedMicros(): number | null {
    return this.lagMessages > 0 ? this.#oldestMicros : null;
  }

  /** A send is under way. */
  get sending(): boolean {
    return this.#sending;
  }

  /**
   * While a send waits (for a connection that is gone, up to the request timeout), the lag is
   * looked at from outside the loop, so the status tells what arrives meanwhile.
   */
  async refreshWhileSending(): Promise<void> {
    const extent = await this.#ctx.local.partitionBytes(this.address);
    this.#localEnd = Math.max(this.#localEnd, extent.next);
    this.#backlog.seen(extent.appendedBytes);
  }

  /** The local log wrote messages of this partition up to `next` (`LocalLog.watchGrowth`). */
  grew(next: number): void {
    if (next > this.#grownTo) this.#grownTo = next;
    this.#wake?.();
    this.#wake = undefined;
  }

  /**
   * Resolves once the local partition grew past the end last seen, or the forwarder stops: a
   * caught-up lane (and one waiting out an outage) waits for the log to tell it, not a timer.
   */
  #growth(): Promise<void> {
    if (this.#grownTo > this.#localEnd) return Promise.resolve();
    const grown = new Promise<void>((resolve) => this.#wake = resolve);
    return Promise.race([grown, this.#ctx.stopped]);
  }

  /** Starts the loop (once); resolves when it ends (stopping). */
  start(): Promise<void> {
    // A count of the backlog under way ends soon after (it stops with the lane).
    this.#run ??= this.#loop().finally(() => this.#backlog.idle());
    return this.#run;
  }

  async #loop(): Promise<void> {
    const ctx = this.#ctx;
    const stored = await ctx.local.getOffset(FORWARD_CONSUMER, this.address);
    this.#next = stored === null ? 0 : stored + 1;
    this.#storedPosition = stored ?? -1;
    this.#mark = await ctx.local.getOffset(MARK_CONSUMER, this.address);
    let failures = 0;
    while (!ctx.stopping()) {
      const upstream = await this.#uplink();
      if (upstream === null) return;
      try {
        await this.#step(upstream);
        failures = 0;
      } catch (e) {
        if (ctx.stopping()) return;
        this.#resolved = false;
        this.#resending = true;
        ctx.failed(e, this.address);
        await this.#observeLocal(true).catch(() => {}); // the lag grows meanwhile
        await ctx.backOff(++failures);
        this.#lingered = true; // what waited through the back-off goes at once
      }
    }
  }

  /** The upstream; while it is down the lag keeps being measured (what waits, how old). */
  async #uplink(): Promise<ForwardTarget | null> {
    const ctx = this.#ctx;
    const open = ctx.openUplink();
    if (open) return open;
    const up = ctx.uplink();
    const waiting = up.then(() => true);
    while (!ctx.stopping()) {
      await this.#observeLocal(true);
      if (await Promise.race([waiting, this.#growth().then(() => false)])) break;
    }
    this.#lingered = true; // what waited for the uplink goes at once
    return up;
  }

  /**
   * The local end and bytes (the backlog's counted once, meanwhile, when not known); with `oldest`,
   * when behind, also the append time of the oldest unforwarded message (while sending, each
   * batch's first message tells it without a read of its own).
   */
  async #observeLocal(oldest = false): Promise<void> {
    const local = this.#ctx.local;
    const extent = await local.partitionBytes(this.address);
    this.#localEnd = extent.next;
    const next = this.#next;
    this.#backlog.observe(extent, next, () => {
      return this.#backlog.count(local, this.address, next, extent, this.#ctx.stopping);
    });
    if (this.#localEnd <= this.#next) this.#oldestMicros = null;
    else if (oldest && this.#oldestMicros === null) {
      const [oldest] = await local.poll(this.address, this.#next, 1);
      this.#oldestMicros = oldest?.timestampMicros ?? null;
    }
  }

  /**
   * One round: resolve if needed, then forward one batch, or wait one linger: for new messages
   * when there are none, for more when fewer than a full send are ready.
   */
  async #step(upstream: ForwardTarget): Promise<void> {
    const ctx = this.#ctx;
    const { stream, topic, partition } = this.address;
    const count = await ctx.upstreamPartitions(upstream, stream, topic);
    const target = { stream, topic, partition: partition % count };
    if (!this.#resolved) await this.#resolve(upstream, target);
    await this.#observeLocal();
    const ready = this.#localEnd - this.#next;
    if (ready <= 0) return this.#growth();
    if (!this.#lingered && !this.#fullBatch(ready)) {
      this.#lingered = true; // what comes meanwhile waits at most this one linger
      return ctx.linger();
    }
    const run = await this.#read();
    if (run === null) return ctx.linger();
    this.#lingered = false;
    this.#oldestMicros = run.firstTimestampMicros;
    this.#sending = true;
    try {
      await upstream.appendEncoded({ ...target, messages: { ...run, stamp: this.#stamp } });
    } finally {
      this.#sending = false;
    }
    this.#next = run.firstOffset + run.count;
    this.#backlog.sent(run);
    this.#oldestMicros = null; // the next batch tells the new oldest
    ctx.reached();
    ctx.counters.sent += run.count;
    ctx.counters.sentBytes += run.payloadBytes;
    if (this.#resending) ctx.counters.resent += run.count;
    this.#resending = false;
    // The position is stored by the forwarder's next flush ({@link flushPosition}).
    if (++this.#sendsSinceMark >= MARK.everySends) await this.#moveMark(upstream, target);
  }

  /**
   * Whether `ready` messages fill a send, by count or by bytes (estimated from the mean size
   * sent so far). Less waits one linger first: a send has a fixed cost (reads, frame, seals,
   * the write and the reply) that, paid for the few messages one round trip gathers under a
   * steady stream, was a large part of what forwarding cost the gateway.
   */
  #fullBatch(ready: number): boolean {
    const { options, counters } = this.#ctx;
    if (ready >= options.batchMaxMessages) return true;
    return ready * meanSentBytes(counters) >= options.batchMaxBytes;
  }

  /** The next batch from the local log, within the bounds; reports a retention gap. */
  async #read(): Promise<EncodedMessages | null> {
    const ctx = this.#ctx;
    const { batchMaxMessages, batchMaxBytes } = ctx.options;
    const run = await ctx.local.pollEncoded(
      this.address,
      this.#next,
      batchMaxMessages,
      batchMaxBytes,
    );
    if (run !== null && run.firstOffset > this.#next) {
      ctx.counters.dropped += run.firstOffset - this.#next;
      ctx.counters.gap(this.address, this.#next, run.firstOffset);
      this.#next = run.firstOffset;
      this.#backlog.skipped();
    }
    return run;
  }

  /**
   * Finds what of this partition already landed upstream after the mark, moves the forwarded
   * position past it, and sets the mark to the upstream end. The first time (no mark yet),
   * the upstream end is the mark: nothing of this lane was ever sent.
   */
  async #resolve(upstream: LogBackend, target: PartitionAddress): Promise<void> {
    const ctx = this.#ctx;
    // With no mark yet nothing of this lane was ever sent: the end needs no settling.
    const end = this.#mark === null
      ? await upstream.nextOffset(target)
      : await settled(() => upstream.nextOffset(target));
    if (this.#mark !== null) {
      // What landed of ours is below the local end: an origin beyond it was never sent by
      // this partition (a corrupted or forged header), and taking it as landed would skip,
      // and so lose, every message up to it.
      const localEnd = await ctx.local.nextOffset(this.address);
      let found = -1;
      let landed = 0;
      let stray = 0;
      let strayMax = -1;
      for (let from = this.#mark; from < end;) {
        const read = await upstream.poll(target, from, Math.min(MARK.resolvePoll, end - from));
        if (read.length === 0) break;
        for (const m of read) {
          const offset = originOffset(m.headers, ctx.options.gatewayId, this.address.partition);
          if (offset !== null && offset >= localEnd) {
            stray++;
            strayMax = Math.max(strayMax, offset);
          } else if (offset !== null && offset >= this.#next) {
            found = Math.max(found, offset);
            landed++;
          }
        }
        from = read[read.length - 1].offset + 1;
      }
      if (stray > 0) {
        ctx.counters.strayOrigins += stray;
        ctx.counters.stray(this.address, stray, strayMax, localEnd);
      }
      if (found >= this.#next) {
        ctx.counters.foundUpstream += landed;
        this.#next = found + 1;
        this.#backlog.skipped();
      }
      await this.flushPosition(); // before the mark moves past what it covers
    }
    this.#mark = end;
    await ctx.local.storeOffset(MARK_CONSUMER, this.address, end);
    this.#sendsSinceMark = 0;
    this.#resolved = true;
    ctx.reached();
  }

  /**
   * Stores the forwarded position if it moved since it was last stored. Sends do not store it
   * each: the forwarder flushes every lane's together, a few times a second (one catalog
   * write for all), and a lane before its mark moves: a stored mark must never pass messages
   * the stored position does not cover, or a restart would send them again.
   */
  async flushPosition(): Promise<void> {
    const confirmed = this.#next - 1;
    if (confirmed <= this.#storedPosition) return;
    await this.#ctx.local.storeOffset(FORWARD_CONSUMER, this.address, confirmed);
    this.#storedPosition = Math.max(this.#storedPosition, confirmed);
  }

  /** Between sends, nothing of this lane is in flight: the upstream end is a safe mark. */
  async #moveMark(upstream: LogBackend, target: PartitionAddress): Promise<void> {
    const end = await upstream.nextOffset(target);
    await this.flushPosition();
    this.#mark = end;
    await this.#ctx.local.storeOffset(MARK_CONSUMER, this.address, end);
    this.#sendsSinceMark = 0;
  }
}

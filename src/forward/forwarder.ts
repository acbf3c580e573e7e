/**
 * Forward mode: the embedded log serves the devices, and this copies every message appended
 * to it to an upstream Iggy, per partition in order, once. One {@link ForwardLane} per local
 * partition (found as topics appear); the upstream is opened, and reopened, here, so a box
 * whose uplink is down at start keeps serving and forwards once it comes up.
 *
 * @module
 */
import { wallClock } from "../base/wall_clock.ts";
import { BackendError, type PartitionAddress } from "../log/port.ts";
import type { Logger } from "../observe/logger.ts";
import { Uplink, type UplinkBacklog } from "../observe/uplink.ts";
import type { ForwardCounters } from "./counters.ts";
import { ForwardLane, type ForwardSource, type ForwardTarget, type LaneContext } from "./lane.ts";
import type { ForwarderOptions } from "./options.ts";

export type { ForwarderOptions } from "./options.ts";
export type { ForwardSource, ForwardTarget } from "./lane.ts";

/** Opens a fresh upstream (an Iggy backend); rejects when it cannot connect. */
export type UpstreamOpener = () => Promise<ForwardTarget>;

/** The uplink as `/ready` and `/metrics` tell it. */
export interface UplinkStatus {
  readonly up: boolean;
  /** Why it is down, or what it is connected to. */
  readonly detail: string;
  readonly lagMessages: number;
  /** Bytes of the records still to send (payloads and encoded headers), as the store counts them. */
  readonly lagBytes: number;
  /** Age of the oldest unforwarded message, seconds (0 when caught up). */
  readonly lagSeconds: number;
  readonly partitions: number;
}

/**
 * How long a stop waits for sends under way, how often new local topics are looked for (and
 * the uplink's health and drain rate with them), how often the lanes' forwarded positions are
 * stored, and how often failed sends while the uplink is up are summed up in the log (ms).
 */
const TIMING = {
  stopWaitMs: 2_000,
  discoverEveryMs: 1_000,
  flushEveryMs: 200,
  failureSummaryMs: 60_000,
} as const;

/** Copies the local log to the upstream. */
export class Forwarder {
  readonly counters: ForwardCounters;
  /** The uplink's state: one `Uplink down` and one `Uplink up` per outage. */
  readonly uplinkState: Uplink;
  readonly #local: ForwardSource;
  readonly #open: UpstreamOpener;
  readonly #o: ForwarderOptions;
  readonly #logger: Logger;
  readonly #lanes = new Map<string, ForwardLane>();
  readonly #targets = new Map<string, Promise<number>>();
  #upstream: ForwardTarget | null = null;
  #connecting: Promise<ForwardTarget | null> | undefined;
  /** Failed sends and reads while the uplink was up, since the last summary line. */
  #unsummed = { failures: 0, reason: "", loggedAt: -Infinity };
  /** When a lane last failed (ms): the health check does not call the uplink up right after. */
  #lastFailureAt = -Infinity;
  #stopping = false;
  #wakeStop!: () => void;
  readonly #stopped = new Promise<void>((r) => this.#wakeStop = r);
  #tick: Promise<void> | undefined;
  #discovering: Promise<void> | undefined;
  #discoverTimer: ReturnType<typeof setInterval> | undefined;
  #lanesContext: LaneContext | undefined;
  #flushTimer: ReturnType<typeof setInterval> | undefined;
  /** Ends the lanes' watch of the local log's growth. */
  #unwatch = () => {};
  #flushing: Promise<unknown> | undefined;

  constructor(local: ForwardSource, open: UpstreamOpener, o: ForwarderOptions, logger: Logger) {
    this.#local = local;
    this.#open = open;
    this.#o = o;
    this.#logger = logger;
    this.counters = {
      sent: 0,
      sentBytes: 0,
      resent: 0,
      foundUpstream: 0,
      dropped: 0,
      failures: 0,
      strayOrigins: 0,
      gap: (a, from, to) => {
        logger.warn("Forward gap: messages went before they were forwarded", {
          ...a,
          from_offset: from,
          to_offset: to - 1,
          messages: to - from,
        });
      },
      stray: (a, count, offset, localEnd) => {
        logger.warn(
          "Forward resolve: upstream messages claim local offsets never written, ignored",
          {
            ...a,
            messages: count,
            highest_claimed_offset: offset,
            local_end: localEnd,
          },
        );
      },
    };
    this.uplinkState = new Uplink({
      name: o.upstreamName,
      backlog: () => this.#backlog(),
      forwarded: () => this.counters.sent,
    }, logger);
  }

  /** Starts forwarding every partition of the local log (after the local log is open). */
  async start(): Promise<void> {
    this.#logger.info("Forwarding to the upstream Iggy", { upstream: this.#o.upstreamName });
    void this.uplink();
    this.#unwatch = this.#local.watchGrowth((a, next) => {
      this.#lanes.get(laneKey(a.stream, a.topic, a.partition))?.grew(next);
    });
    await this.#discover();
    this.#discoverTimer = setInterval(() => {
      void this.#discover();
      this.#checkUplink();
    }, TIMING.discoverEveryMs);
    this.#flushTimer = setInterval(() => void this.#flushPositions(), TIMING.flushEveryMs);
  }

  /** Stops the lanes (a send under way is waited for a moment) and closes the upstream. */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    clearInterval(this.#discoverTimer);
    clearInterval(this.#flushTimer);
    this.#unwatch();
    this.#wakeStop();
    const lanes = Promise.all([...this.#lanes.values()].map((l) => l.start()));
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([lanes, new Promise<void>((r) => timer = setTimeout(r, TIMING.stopWaitMs))]);
    clearTimeout(timer);
    await this.#discovering;
    await this.#flushing;
    await this.#flushPositions();
    await this.#connecting;
    await this.#upstream?.close().catch(() => {});
    this.#upstream = null;
  }

  /** The uplink's state and the lag over every partition. */
  status(nowMicros = wallClock.nowMicros()): UplinkStatus {
    const u = this.uplinkState.fields(nowMicros / 1000);
    const health = this.#upstream?.health();
    return {
      up: u.up,
      detail: u.up ? (health?.detail ?? this.#o.upstreamName) : u.reason,
      lagMessages: u.waiting_messages,
      lagBytes: u.waiting_bytes,
      lagSeconds: u.oldest_age_s,
      partitions: this.#lanes.size,
    };
  }

  /** What waits over every partition: messages, bytes, the oldest's append time. */
  #backlog(): UplinkBacklog {
    let messages = 0;
    let bytes = 0;
    let oldest = Infinity;
    for (const lane of this.#lanes.values()) {
      messages += lane.lagMessages;
      bytes += lane.lagBytes;
      const t = lane.oldestUnforwardedMicros;
      if (t !== null && t < oldest) oldest = t;
    }
    // Its age counts from its timestamp moved by the clock's forward steps since.
    const oldestMicros = oldest === Infinity ? null : wallClock.correctedMicros(oldest);
    return { messages, bytes, oldestMicros };
  }

  /**
   * Once a second: an upstream whose connections are all lost is down even while no lane sends;
   * one that is healthy again, with no lane failing since the last look, is up. The drain rate
   * is sampled here too, and the lag of lanes whose send waits.
   */
  #checkUplink(): void {
    for (const lane of this.#lanes.values()) {
      if (lane.sending) lane.refreshWhileSending().catch(() => {});
    }
    const upstream = this.#upstream;
    const state = this.uplinkState;
    if (upstream && !this.#stopping) {
      const health = upstream.health();
      if (!health.ready) state.down(health.reason ?? "upstream not ready");
      else if (!state.up && performance.now() - this.#lastFailureAt >= TIMING.discoverEveryMs) {
        state.reached(health.detail);
      }
    }
    state.sample();
  }

  /** The open upstream, connecting (with back-off) while there is none; null once stopping. */
  uplink(): Promise<ForwardTarget | null> {
    if (this.#stopping) return Promise.resolve(null);
    if (this.#upstream) return Promise.resolve(this.#upstream);
    this.#connecting ??= this.#connect().finally(() => this.#connecting = undefined);
    return this.#connecting;
  }

  async #connect(): Promise<ForwardTarget | null> {
    for (let failures = 0; !this.#stopping;) {
      try {
        const upstream = await this.#open();
        if (this.#stopping) {
          await upstream.close().catch(() => {});
          return null;
        }
        this.#upstream = upstream;
        this.uplinkState.reached(upstream.health().detail ?? "");
        return upstream;
      } catch (e) {
        this.uplinkState.down(e instanceof Error ? e.message : String(e));
        await this.#backOff(++failures);
      }
    }
    return null;
  }

  /** What every lane is given (one object for all of them). */
  #laneContext(): LaneContext {
    return {
      local: this.#local,
      options: this.#o,
      counters: this.counters,
      uplink: () => this.uplink(),
      openUplink: () => this.#stopping ? null : this.#upstream,
      upstreamPartitions: (u, s, t) => this.#upstreamPartitions(u, s, t),
      linger: () => this.#linger(),
      backOff: (n) => this.#backOff(n),
      failed: (e, where) => this.#failed(e, where),
      reached: () => this.uplinkState.reached(),
      stopping: () => this.#stopping,
      stopped: this.#stopped,
    };
  }

  /** Adds a lane for every local partition that has none yet. */
  #discover(): Promise<void> {
    this.#discovering ??= this.#addLanes().finally(() => this.#discovering = undefined);
    return this.#discovering;
  }

  async #addLanes(): Promise<void> {
    const topics = await this.#local.listTopics().catch(() => []);
    const ctx = this.#lanesContext ??= this.#laneContext();
    for (const t of topics) {
      for (let p = 0; p < t.partitions && !this.#stopping; p++) {
        const key = laneKey(t.stream, t.topic, p);
        if (this.#lanes.has(key)) continue;
        const lane = new ForwardLane({ stream: t.stream, topic: t.topic, partition: p }, ctx);
        this.#lanes.set(key, lane);
        lane.start().catch((e) => this.#failed(e, lane.address));
      }
    }
  }

  /** Stores every lane's moved position, in one go (one flush at a time). */
  #flushPositions(): Promise<unknown> {
    if (this.#flushing) return this.#flushing;
    const lanes = [...this.#lanes.values()];
    this.#flushing = Promise.all(lanes.map((l) => l.flushPosition().catch(() => {})))
      .finally(() => this.#flushing = undefined);
    return this.#flushing;
  }

  /** The upstream topic's partition count; a missing topic is created like the local one. */
  #upstreamPartitions(upstream: ForwardTarget, stream: string, topic: string): Promise<number> {
    const key = `${stream}\n${topic}`;
    let known = this.#targets.get(key);
    if (!known) {
      known = this.#ensureTarget(upstream, stream, topic);
      known.catch(() => this.#targets.delete(key));
      this.#targets.set(key, known);
    }
    return known;
  }

  async #ensureTarget(upstream: ForwardTarget, stream: string, topic: string): Promise<number> {
    const there = await upstream.getTopic(stream, topic);
    if (there) return there.partitions;
    const local = await this.#local.getTopic(stream, topic);
    const partitions = local?.partitions ?? 1;
    const made = await upstream.createTopic(stream, topic, {
      partitions,
      durable: this.#o.durableTopics,
    });
    this.#logger.info("Upstream topic created", { stream, topic, partitions: made.partitions });
    return made.partitions;
  }

  /**
   * A lane's send or read upstream failed. A lost connection (or an upstream that says it is
   * not ready) is the uplink going down: logged once per outage by {@link uplinkState}; each
   * lane's retry is a debug line. Other failures while the uplink is up are summed up in one
   * warn line a minute at most.
   */
  #failed(e: unknown, where: PartitionAddress): void {
    this.counters.failures++;
    this.#lastFailureAt = performance.now();
    const reason = e instanceof Error ? e.message : String(e);
    // A deleted or changed upstream topic is looked up again.
    this.#targets.delete(`${where.stream}\n${where.topic}`);
    this.#logger.debug("Forward failed: will resolve and resend", { ...where, reason });
    if (isConnectionLoss(e) || this.#upstream?.health().ready !== true) {
      this.uplinkState.down(reason);
      return;
    }
    const sum = this.#unsummed;
    sum.failures++;
    sum.reason = reason;
    if (this.#lastFailureAt - sum.loggedAt < TIMING.failureSummaryMs) return;
    this.#logger.warn("Forward sends failing: will resolve and resend", {
      failures: sum.failures,
      last_reason: sum.reason,
      last_partition: `${where.stream}/${where.topic}/${where.partition}`,
    });
    this.#unsummed = { failures: 0, reason: "", loggedAt: this.#lastFailureAt };
  }

  /** One shared timer for every lingering lane. */
  #linger(): Promise<void> {
    this.#tick ??= this.#sleep(this.#o.lingerMs).then(() => {
      this.#tick = undefined;
    });
    return this.#tick;
  }

  #backOff(failures: number): Promise<void> {
    const ms = Math.min(this.#o.retryMaxMs, 50 * 2 ** Math.min(failures - 1, 16));
    return this.#sleep(ms);
  }

  /** Waits `ms`, or less when stopping. */
  async #sleep(ms: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([new Promise<void>((r) => timer = setTimeout(r, ms)), this.#stopped]);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** A lane's key in {@link Forwarder}'s map: its local partition. */
function laneKey(stream: string, topic: string, partition: number): string {
  return `${stream}\n${topic}\n${partition}`;
}

/** Whether a failure says the upstream is out of reach (not that one request was wrong). */
function isConnectionLoss(e: unknown): boolean {
  if (e instanceof BackendError) return e.code === "unavailable" || e.code === "timeout";
  return true;
}

/**
 * `/status.json`: every figure the status page shows, as fields. `statusJson()` is a plain
 * function of a {@link StatusSource}, which the `Gateway` satisfies structurally, so it is tested
 * without sockets; the console's own figures (history, store, clients, sessions:
 * `console_state.ts`) are merged in by the route.
 *
 * @module
 */
import type { UplinkFields } from "../observe/uplink.ts";
import { type WallClock, wallClock } from "../base/wall_clock.ts";

/** A counter as the page reads it (`src/observe/metrics.ts` `Counter` fits). */
export interface CounterReading {
  get(labels?: Readonly<Record<string, string>>): number;
  readonly values: ReadonlyMap<string, number>;
}

/** One shared reader as `Delivery.readerStats()` reports it. */
export interface ReaderReading {
  readonly triple: { readonly stream: string; readonly topic: string; readonly partition: number };
  /** Next offset to poll. */
  readonly position: number;
  /** Last stored consumer offset (-1 = none). */
  readonly committed: number;
  /** Polled messages not yet settled (ack ledger entries). */
  readonly unsettled: number;
  readonly subscribers: number;
}

/** Resend counts of an Iggy backend (`ResendCounters` of the backend port). */
interface ResendReading {
  readonly resends: number;
  readonly foundStored?: number;
  readonly renewals: number;
  readonly possibleDuplicates: number;
}

/** What the status page shows; the `Gateway` has all of it. */
export interface StatusSource {
  readonly config: { readonly gateway: { readonly id: string; readonly backend: string } };
  readonly registry: { readonly size: number };
  readonly metrics: {
    /** label outcome = appended | acked | rejected | denied | failed */
    readonly publishes: CounterReading;
    /** label rule = 1-based rule index, or "default" */
    readonly ruleHits: CounterReading;
    readonly delivered: CounterReading;
    readonly droppedQos0: CounterReading;
    readonly evictions: CounterReading;
    readonly authFailures: CounterReading;
    readonly connectionsAccepted: CounterReading;
  };
  readonly delivery: {
    readerStats(): readonly ReaderReading[];
    /** Share groups with members connected (`delivery/share_stats.ts`). */
    shareStats?(): readonly ShareReading[];
    readonly parkedShareGroups?: number;
  };
  /** The retained set: topics and bytes (topic + headers + payload). */
  readonly retained?: { readonly set: { readonly size: number; readonly bytes: number } };
  /** The uplink (forward mode's upstream, or Iggy in Iggy mode); null for a plain embedded log. */
  readonly uplink?: { fields(now?: number): UplinkFields } | null;
  /** Iggy resend counts, when the backend keeps them. */
  readonly backend?: { readonly remote?: { resendCounters(): ResendReading } };
  readonly maps: {
    readonly current: {
      readonly source: string;
      readonly defaultStream: string;
      readonly defaultTopic: string;
      readonly rules: readonly {
        readonly index: number;
        readonly pattern: string;
        readonly stream: string;
        readonly topic: string;
        readonly partitionKey: string | null;
      }[];
    };
  };
  readiness(): {
    readonly ready: boolean;
    readonly reasons: readonly string[];
    readonly warnings: readonly string[];
    readonly backend?: string;
  };
}

/** One share group as `Delivery.shareStats()` reports it. */
export interface ShareReading {
  readonly group: string;
  readonly members: number;
  readonly lag: number;
  readonly partitions: number | null;
}

/** Share groups listed on the page at most (the most lagging first); the counts cover all. */
const SHARE_GROUPS_LISTED = 100;

/** The share groups' part of `/status.json`. */
function sharesJson(g: StatusSource) {
  const groups = [...(g.delivery.shareStats?.() ?? [])].sort((x, y) => y.lag - x.lag);
  return {
    connected: groups.length,
    parked: g.delivery.parkedShareGroups ?? 0,
    members: groups.reduce((n, x) => n + x.members, 0),
    lag: groups.reduce((n, x) => n + x.lag, 0),
    groups: groups.slice(0, SHARE_GROUPS_LISTED),
  };
}

/** Publish outcomes, exactly as docs/ARCHITECTURE.md names them. */
export const OUTCOMES = ["appended", "acked", "rejected", "denied", "failed"] as const;

function sum(c: CounterReading): number {
  let n = 0;
  for (const v of c.values.values()) n += v;
  return n;
}

/** Steps of the wall clock since start, and the last one (null when none). */
export function clockJson(clock: Pick<WallClock, "jumps" | "lastJump">): unknown {
  const j = clock.lastJump;
  const last = j === null ? null : {
    at: new Date(j.atMs).toISOString(),
    direction: j.stepMs > 0 ? "forward" : "backward",
    step_s: Math.round(Math.abs(j.stepMs) / 1000),
  };
  return { jumps: clock.jumps, last_jump: last };
}

/** The figures behind `/status.json`: counters are totals; the page computes rates. */
export function statusJson(g: StatusSource, now: number = Date.now()): unknown {
  const m = g.metrics;
  const map = g.maps.current;
  const readiness = g.readiness();
  return {
    gateway: {
      id: g.config.gateway.id,
      backend: g.config.gateway.backend,
      ...(readiness.backend ? { backend_detail: readiness.backend } : {}),
    },
    ...(g.uplink ? { uplink: g.uplink.fields(now) } : {}),
    time_ms: now,
    clock: clockJson(wallClock),
    ready: readiness.ready,
    not_ready_reasons: [...readiness.reasons],
    warnings: [...readiness.warnings],
    connections: g.registry.size,
    connections_accepted_total: sum(m.connectionsAccepted),
    auth_failures_total: sum(m.authFailures),
    publishes_total: Object.fromEntries(OUTCOMES.map((o) => [o, m.publishes.get({ outcome: o })])),
    deliveries_total: sum(m.delivered),
    deliveries_dropped_total: sum(m.droppedQos0),
    evictions_total: sum(m.evictions),
    ...(g.retained
      ? { retained: { topics: g.retained.set.size, bytes: g.retained.set.bytes } }
      : {}),
    ...resendsJson(g.backend?.remote?.resendCounters()),
    share_groups: sharesJson(g),
    readers: g.delivery.readerStats().map((s) => ({
      stream: s.triple.stream,
      topic: s.triple.topic,
      partition: s.triple.partition,
      position: s.position,
      committed: s.committed,
      // Same figure as the reader_lag_messages gauge: polled but not yet stored.
      lag: Math.max(0, s.position - 1 - s.committed),
      unsettled: s.unsettled,
      subscribers: s.subscribers,
    })),
    topic_map: {
      source: map.source,
      default_stream: map.defaultStream,
      default_topic: map.defaultTopic,
      default_hits: m.ruleHits.get({ rule: "default" }),
      rules: map.rules.map((r) => ({
        index: r.index,
        pattern: r.pattern,
        stream: r.stream,
        topic: r.topic,
        partition_key: r.partitionKey,
        hits: m.ruleHits.get({ rule: String(r.index) }),
      })),
    },
  };
}

/** `iggy_sends` of status.json: resends, cut sends found stored (0.11), renewals (0.12), possible duplicates (0.11). */
function resendsJson(c: ResendReading | undefined) {
  if (!c) return {};
  return {
    iggy_sends: {
      resent_total: c.resends,
      found_stored_total: c.foundStored ?? 0,
      producer_renewals_total: c.renewals,
      possible_duplicates_total: c.possibleDuplicates,
    },
  };
}

/**
 * The status page's figures beyond the counters: version and uptime, listener addresses, rates
 * "now" (against the history ring, so the first paint shows them), the last 15 minutes
 * (`observe/history.ts`), the store's fill against `embedded.max_store_bytes` with its largest
 * topics, connections by listener and protocol with a bounded client table, and the stored
 * sessions. A timer samples the ring and scans the store every interval; the page's requests
 * read what the last sample and scan left (a request does no I/O of its own).
 *
 * @module
 */
import process from "node:process";
import { GATEWAY_VERSION } from "../base/version.ts";
import { History, HISTORY_OUTCOMES, type HistorySample, rate } from "../observe/history.ts";
import type { AdminSource, ClientRow, SessionRow, TopicRow } from "./admin_source.ts";
import type { UplinkFields } from "../observe/uplink.ts";
import type { BackendHealth } from "../log/port.ts";

/** Clients listed in status.json at most (the oldest first); the counts cover all. */
export const CLIENTS_LISTED = 200;
/** Stored sessions listed at most (offline ones first, soonest to expire first). */
export const SESSIONS_LISTED = 50;
/** Largest topics listed with the store. */
export const TOPICS_LISTED = 5;
/** How long the clients' and sessions' summaries are reused (ms). */
const PEOPLE_REFRESH_MS = 1000;
/** Partitions one store scan reads at most; a larger store is reported as scanned in part. */
export const MAX_SCANNED_PARTITIONS = 5000;

/** What the console reads of the gateway (the `Gateway` has it). */
export interface ConsoleInputs {
  readonly config: {
    readonly gateway: { readonly backend: string };
    readonly listeners: Readonly<Record<"tcp" | "tls" | "ws" | "wss" | "http", string>>;
    readonly embedded: { readonly max_store_bytes: number };
    readonly forward: { readonly enabled: boolean };
  };
  readonly metrics: {
    readonly publishes: { get(labels: Record<string, string>): number };
    readonly delivered: { readonly values: ReadonlyMap<string, number> };
    readonly pubackLatency: { readonly sum: number; readonly count: number };
  };
  readonly backend: { health(): Pick<BackendHealth, "ready" | "reason" | "full"> };
  readonly uplink?: { fields(now?: number): UplinkFields } | null;
}

/** The store as the page shows it. */
interface StoreScan {
  readonly recordsBytes: number;
  readonly topics: number;
  readonly largest: readonly Omit<TopicRow, "partitions">[];
  readonly partial: boolean;
  readonly atMs: number;
}

/** The console's figures, sampled on a timer. */
export class ConsoleState {
  readonly history: History;
  readonly startedMs: number;
  readonly #g: ConsoleInputs;
  readonly #admin: AdminSource;
  readonly #now: () => number;
  #timer: ReturnType<typeof setInterval> | undefined;
  #scan: StoreScan | null = null;
  #scanning = false;
  #peopleCache: {
    at: number;
    clients: ReturnType<typeof clientsJson>;
    sessions: ReturnType<typeof sessionsJson>;
  } | null = null;

  constructor(
    g: ConsoleInputs,
    admin: AdminSource,
    o: { now?: () => number; history?: History } = {},
  ) {
    this.#g = g;
    this.#admin = admin;
    this.#now = o.now ?? Date.now;
    this.history = o.history ?? new History();
    this.startedMs = this.#now();
    this.history.add(this.sample());
  }

  /** Starts the sampling timer (unref'd: it never holds the process). */
  start(): void {
    if (this.#timer !== undefined) return;
    const timer = setInterval(() => this.tick(), this.history.intervalMs);
    Deno.unrefTimer(timer as unknown as number);
    this.#timer = timer;
    void this.scanStore();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One interval: a sample into the ring and a store scan. */
  tick(): void {
    this.history.add(this.sample());
    void this.scanStore();
  }

  /** The running totals and levels now. */
  sample(): HistorySample {
    const m = this.#g.metrics;
    const cpu = process.cpuUsage();
    let deliveries = 0;
    for (const v of m.delivered.values.values()) deliveries += v;
    return {
      t: this.#now(),
      publishes: Object.fromEntries(
        HISTORY_OUTCOMES.map((o) => [o, m.publishes.get({ outcome: o })]),
      ) as HistorySample["publishes"],
      deliveries,
      pubackSumS: m.pubackLatency.sum,
      pubackCount: m.pubackLatency.count,
      forwardWaiting: this.#g.config.forward.enabled
        ? (this.#g.uplink?.fields().waiting_messages ?? 0)
        : 0,
      rssBytes: Deno.memoryUsage().rss,
      cpuMicros: cpu.user + cpu.system,
    };
  }

  /**
   * Reads the local log's topics (embedded store, forward mode's local store) for the fill and
   * the largest topics; one scan at a time, at most {@link MAX_SCANNED_PARTITIONS} partitions.
   */
  async scanStore(): Promise<void> {
    if (this.#scanning || this.#g.config.gateway.backend !== "embedded") return;
    this.#scanning = true;
    try {
      const rows = await this.#admin.topics(MAX_SCANNED_PARTITIONS);
      if (rows === null) return;
      this.#scan = {
        recordsBytes: rows.topics.reduce((n, t) => n + (t.bytes ?? 0), 0),
        topics: rows.topics.length,
        largest: rows.topics.slice(0, TOPICS_LISTED).map(({ partitions: _, ...t }) => t),
        partial: rows.partial,
        atMs: this.#now(),
      };
    } catch {
      // The store's own errors show in readiness; the last scan stays.
    } finally {
      this.#scanning = false;
    }
  }

  /**
   * The clients' and sessions' summaries, made at most once a second however many pages poll
   * (each is a pass over every connection and stored session, and a sort).
   */
  #people(now: number) {
    const cached = this.#peopleCache;
    if (cached !== null && now - cached.at < PEOPLE_REFRESH_MS && now >= cached.at) return cached;
    this.#peopleCache = {
      at: now,
      clients: clientsJson(this.#admin.clients()),
      sessions: sessionsJson(this.#admin.sessions()),
    };
    return this.#peopleCache;
  }

  /** The console's part of `/status.json`. */
  json(now: number = this.#now()) {
    // The scan at start may have run before the store opened: the first page asks again.
    if (this.#scan === null) void this.scanStore();
    const people = this.#people(now);
    return {
      version: GATEWAY_VERSION,
      started_ms: this.startedMs,
      uptime_s: Math.max(0, Math.round((now - this.startedMs) / 1000)),
      listeners: this.#listeners(),
      rates: this.#rates(now),
      history: { interval_ms: this.history.intervalMs, ...this.history.series() },
      store: this.#store(),
      clients: people.clients,
      stored_sessions: people.sessions,
    };
  }

  #listeners() {
    const l = this.#g.config.listeners;
    return (["tcp", "tls", "ws", "wss", "http"] as const)
      .filter((k) => l[k] !== "")
      .map((k) => ({ name: k, address: l[k] }));
  }

  /** Per second since the newest sample at least a second old (the start, at first). */
  #rates(now: number) {
    const cur = this.sample();
    const base = this.history.baseFor(now) ?? cur;
    const ms = cur.t - base.t;
    return {
      window_s: Math.round(ms / 100) / 10,
      ...Object.fromEntries(
        HISTORY_OUTCOMES.map((o) => [o, rate(cur.publishes[o] - base.publishes[o], ms)]),
      ),
      deliveries: rate(cur.deliveries - base.deliveries, ms),
    };
  }

  #store() {
    if (this.#g.config.gateway.backend !== "embedded") return null;
    const health = this.#g.backend.health();
    const causes = health.full ?? [];
    const full = causes.length > 0 ? causes.map((c) => c.reason).join("; ") : null;
    const s = this.#scan;
    const max = this.#g.config.embedded.max_store_bytes;
    return {
      max_bytes: max,
      records_bytes: s?.recordsBytes ?? null,
      fill_percent: s === null ? null : Math.round((s.recordsBytes / max) * 1000) / 10,
      full,
      // Each cause on its own (max_store_bytes, disk, catalog): freeing one may leave another.
      full_causes: causes,
      topics: s?.topics ?? null,
      largest_topics: s?.largest ?? [],
      scanned_in_part: s?.partial ?? false,
      scanned_ms: s?.atMs ?? null,
    };
  }
}

function clientsJson(rows: readonly ClientRow[]) {
  const by: Record<string, number> = {};
  for (const c of rows) {
    const key = `${c.listener} · MQTT ${c.protocol}`;
    by[key] = (by[key] ?? 0) + 1;
  }
  return { total: rows.length, by_listener: by, listed: rows.slice(0, CLIENTS_LISTED) };
}

function sessionsJson(rows: readonly SessionRow[]) {
  const offline = rows.filter((s) => !s.connected)
    .sort((a, b) => (a.expires_at_ms ?? 0) - (b.expires_at_ms ?? 0));
  return {
    total: rows.length,
    connected: rows.length - offline.length,
    offline: offline.length,
    listed: [...offline, ...rows.filter((s) => s.connected)].slice(0, SESSIONS_LISTED).map((s) => ({
      client_id: s.client_id,
      connected: s.connected,
      expires_at_ms: s.expires_at_ms,
      subscriptions: s.subscriptions.length,
    })),
  };
}

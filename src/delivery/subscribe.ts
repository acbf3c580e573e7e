/**
 * Subscribing (S1–S5): check the filter, resolve it with the same map as the way in
 * (`filter_triples.ts`: exact and wildcard filters), check the poll right, then join or create
 * the shared reader of every triple it reads. A subscription that starts behind the shared
 * readers (a stored session resuming, a replay) gets a catch-up per triple (`catch_up.ts`).
 *
 * @module
 */
import { SUBACK_FAILURE } from "../codec/encoder.ts";
import { utf8Length } from "../base/utf8.ts";
import { filterProblem, isWildcardFilter } from "../mapping/mod.ts";
import type { LogBackend } from "../log/port.ts";
import { isLocalLog } from "../log/local_log.ts";
import type { Logger } from "../observe/logger.ts";
import type { GatewayMetrics } from "../observe/gateway_metrics.ts";
import type { PublishPreparer } from "../session/publish.ts";
import type { SubscribeRequest } from "../session/delivery_port.ts";
import { parseReplayFilter } from "../session/replay_from.ts";
import { CatchUp, type CatchUpDeps, type ReplayBudget } from "./catch_up.ts";
import type { ClientQueue } from "./client_queue.ts";
import { type FilterTripleDeps, filterTriples } from "./filter_triples.ts";
import type { ReaderOptions, RouteFn, SharedReader } from "./reader.ts";
import { ReaderPool } from "./reader_pool.ts";
import { parseShare, ShareGroups } from "./share/groups.ts";
import { ShareSpread } from "./share/spread.ts";
import {
  type Subscription,
  type SubscriptionRegistry,
  type Triple,
  tripleKey,
} from "./registry.ts";
import { replayStartOffset } from "./replay_start.ts";
import type { ClientQueues } from "./subscriber_queues.ts";

/** MQTT 5 SUBACK 0x8F Topic Filter invalid. */
const INVALID_FILTER = 0x8f;

/** Limits of subscriptions, and the readers' options. */
export interface SubscribeOptions extends ReaderOptions {
  readonly maxSubscriptionsPerClient: number;
  readonly maxTopicBytes: number;
  readonly maxTopicLevels: number;
  /** Triples one filter may resolve to; beyond → SUBACK 0x80. */
  readonly maxTriplesPerSubscription: number;
  /** Messages one replay subscription replays; beyond → skipped to live. */
  readonly maxReplayMessages: number;
  /** Shared subscription groups (connected or parked); a new one beyond → 0x97. */
  readonly maxShareGroups?: number;
  /** Members of one shared subscription group; one more → 0x97. */
  readonly maxShareMembers?: number;
  /** Targets wildcard filters never resolve to (the stored sessions' record topic). */
  readonly hiddenTargets?: readonly { readonly stream: string; readonly topic: string }[];
}

/** Where a subscription starts on a triple: an offset, or null for live. */
export type StartAt = (triple: Triple, key: string) => Promise<number | null>;

/** Catch-ups a stored session's resume collects over all its filters (one per triple). */
export type PendingCatchUps = Map<
  string,
  { triple: Triple; from: number; subs: Subscription<ClientQueue>[] }
>;

/**
 * A resume: positions per triple, and where its catch-ups are collected. `permanent` is set
 * when `subscribeOne` refused for a reason no retry changes (invalid filter, no poll right, no
 * target): only then does the stored session drop the filter, never on a passing failure.
 */
export interface Resume {
  readonly startAt: StartAt;
  readonly pending: PendingCatchUps;
  permanent?: boolean;
}

/** A filter's `$share/<group>/` or `$replay/<from>/` prefix, read; why it is malformed. */
function prefixesOf(filter: string) {
  const s = parseShare(filter);
  const r = s === null ? parseReplayFilter(filter) : null;
  const problem = s !== null && "problem" in s
    ? s.problem
    : r !== null && "problem" in r
    ? r.problem
    : undefined;
  return {
    share: s !== null && "group" in s ? s : null,
    replay: r !== null && "filter" in r ? r : null,
    problem,
  };
}

/** S1: why a topic filter is refused, or null when it is acceptable. */
function checkFilter(topic: string, opts: SubscribeOptions): string | null {
  // Same limits as PUBLISH topics; wildcards only as whole levels, "#" last.
  if (topic.length === 0) return "empty filter";
  const misplaced = filterProblem(topic);
  if (misplaced !== null) return misplaced;
  if (utf8Length(topic) > opts.maxTopicBytes) return "filter too long";
  if (topic.split("/").length > opts.maxTopicLevels) return "too many levels";
  if (topic.startsWith("$SYS")) return "$SYS is reserved";
  return null;
}

/** The subscriptions and the shared readers they hold. */
export class Subscriptions {
  readonly pool: ReaderPool;
  readonly readers: Map<string, SharedReader>;
  /** Catch-ups running, per client (a stored session's position covers them). */
  readonly catchUps = new Map<ClientQueue, Set<CatchUp>>();
  readonly registry: SubscriptionRegistry<ClientQueue>;
  /** Shared subscriptions' groups (`$share/<group>/<filter>`). */
  readonly shares = new ShareGroups<ClientQueue>();
  /** Share groups split with other gateways by the log's consumer groups (Iggy); else null. */
  readonly spread: ShareSpread | null;
  readonly tripleDeps: FilterTripleDeps;
  readonly opts: SubscribeOptions;
  readonly logger: Logger;
  readonly stopping: () => boolean;
  #clients: ClientQueues;
  #backend: LogBackend;
  #catchUpDeps: CatchUpDeps;
  readonly #storedStart: (filter: string) => StartAt | null;
  /**
   * `$share` keys whose group started from its stored sessions' positions since this process
   * started (at most one key per share filter that stored sessions hold).
   */
  readonly #groupsStarted = new Set<string>();

  constructor(deps: {
    registry: SubscriptionRegistry<ClientQueue>;
    clients: ClientQueues;
    backend: LogBackend;
    preparer: PublishPreparer;
    options: SubscribeOptions & { readonly maxClientBytes: number };
    route: RouteFn;
    stopping: () => boolean;
    metrics: GatewayMetrics;
    logger: Logger;
    /** Where the stored sessions subscribed to `filter` start together, or null for none. */
    storedStart?: (filter: string) => StartAt | null;
  }) {
    this.#storedStart = deps.storedStart ?? (() => null);
    this.registry = deps.registry;
    this.#clients = deps.clients;
    this.#backend = deps.backend;
    this.opts = deps.options;
    this.stopping = deps.stopping;
    this.logger = deps.logger;
    const growth = isLocalLog(deps.backend) ? deps.backend : null;
    this.pool = new ReaderPool({ ...deps, options: deps.options, growth });
    this.readers = this.pool.readers;
    this.tripleDeps = {
      preparer: deps.preparer,
      backend: deps.backend,
      maxTriples: deps.options.maxTriplesPerSubscription,
      hidden: deps.options.hiddenTargets ?? [],
    };
    this.#catchUpDeps = {
      backend: deps.backend,
      metrics: deps.metrics,
      logger: deps.logger,
      pollBatch: deps.options.pollBatch,
      maxClientBytes: deps.options.maxClientBytes,
      reader: (key) => this.readers.get(key),
      live: (q) => !this.stopping() && this.#clients.get(q.sub) === q,
      evict: (q, why) => this.#clients.evict(q, why),
    };
    const groups = deps.backend.groups;
    this.spread = groups === undefined ? null : new ShareSpread({
      ...this.#catchUpDeps,
      backend: deps.backend,
      groups,
      handedOver: (n) => deps.metrics.shareHandover.inc({}, n),
    });
  }

  /**
   * S1–S5 for one filter of a SUBSCRIBE; its return code. A `$replay/<from>/` prefix (or
   * `f.from`, MQTT 5's `iggy-from`) starts it in the log's past; `resume` (a stored session)
   * starts it at the session's positions instead.
   */
  async subscribeOne(queue: ClientQueue, f: SubscribeRequest, resume?: Resume): Promise<number> {
    const filter = f.filter;
    const { share, replay, problem } = prefixesOf(filter);
    if (resume) resume.permanent = true; // until past the checks of the filter itself
    if (problem !== undefined) return this.refuse(queue, filter, problem, INVALID_FILTER);
    const match = share?.filter ?? replay?.filter ?? filter;
    const bad = checkFilter(match, this.opts);
    if (bad !== null) return this.refuse(queue, filter, bad, INVALID_FILTER);
    if (resume) resume.permanent = false;
    const existing = this.registry.get(queue, filter);
    if (!existing && this.registry.countFor(queue) >= this.opts.maxSubscriptionsPerClient) {
      return this.refuse(queue, filter, "max_subscriptions_per_client reached", 0x97);
    }
    const granted = f.qos; // every level is granted as asked (QoS 2 too)
    if (existing && f.from === undefined) {
      existing.qos = granted; // [MQTT-3.8.4-3] replace, no duplicate copies
      existing.options = f.options; // MQTT 5: the options are replaced too
      return granted;
    }
    if (existing) { // MQTT 5 iggy-from asks for a start again: the subscription is made anew
      this.registry.remove(queue, filter);
      this.release(existing);
    }
    // S2–S3: resolve with the same map as the way in; poll right per triple.
    let resolved;
    try {
      resolved = await filterTriples(this.tripleDeps, queue.sub.principal, match);
    } catch (err) {
      return this.refuse(queue, filter, `backend error: ${message(err)}`);
    }
    if (resolved.refused !== undefined) {
      if (resume) resume.permanent = resolved.permanent === true;
      return this.refuse(queue, filter, resolved.refused, resolved.code5);
    }
    const s: Subscription<ClientQueue> = {
      client: queue,
      qos: granted,
      startOffsets: new Map(),
      match,
      prefix: replay?.prefix ?? "",
      wildcard: isWildcardFilter(match),
    };
    if (f.options !== undefined) s.options = f.options; // MQTT 5, kept for routing
    if (share !== null) return await this.#join(s, filter, share, resolved.triples, resume);
    const from = replay?.from ?? f.from;
    const startAt = resume?.startAt ??
      (from === undefined || from.kind === "latest"
        ? undefined
        : (t: Triple) => replayStartOffset(this.#backend, t, from));
    return await this.#attach(s, filter, resolved.triples, startAt, resume?.pending);
  }

  /**
   * A shared subscription's member joins its group. It starts live, the group's messages not
   * being one member's to catch up on, unless the group was parked (its last member left with a
   * stored session): then the first member back starts at the group's position. After a
   * restart no group is parked: the group's first member starts at the lowest position of the
   * stored sessions subscribed to it.
   */
  async #join(
    s: Subscription<ClientQueue>,
    filter: string,
    share: { readonly group: string; readonly filter: string },
    triples: Triple[],
    resume: Resume | undefined,
  ): Promise<number> {
    const key = `${share.group}/${share.filter}`;
    const full = this.shares.full(key, this.opts.maxShareGroups, this.opts.maxShareMembers);
    if (full !== null) return this.refuse(s.client, filter, `${full} reached`, 0x97);
    const parked = this.shares.unpark(key);
    // Split between gateways, the group starts from its position in the log (`share/spread.ts`).
    // Here, a parked group starts where it was parked; the first member since this process
    // started, where the group's stored sessions (this one's too) had all settled: what was in
    // flight to any of them when the gateway stopped comes again, to the group.
    let startAt: StartAt | undefined;
    if (this.spread === null && parked) startAt = async (_t, k) => await parked.get(k) ?? null;
    else if (this.spread === null && !this.#groupsStarted.has(key)) {
      const stored = this.#storedStart(filter);
      if (stored !== null) {
        this.#groupsStarted.add(key);
        startAt = stored;
      }
    }
    const code = await this.#attach(s, filter, triples, startAt, resume?.pending, key);
    const g = s.share;
    // Started by whichever member gets here first (`start` once per group): not "the only
    // member", since two subscribes that finish in one turn both see two members here.
    if (this.spread !== null && g !== undefined && g.members.includes(s)) {
      await this.spread.start(g, triples, parked !== undefined || resume !== undefined);
    }
    return code;
  }

  /**
   * S4–S5: reserves the reader of every triple, places the start on each (behind the reader:
   * a catch-up), then registers the subscription and starts what it created.
   */
  async #attach(
    s: Subscription<ClientQueue>,
    filter: string,
    triples: Triple[],
    startAt: StartAt | undefined,
    pending: PendingCatchUps | undefined,
    shareKey?: string,
  ): Promise<number> {
    const queue = s.client;
    // Readers created here start polling only once the subscription is in the registry: a
    // reader would otherwise route (and settle, with no copies) what is appended during the
    // awaits below, from the start this subscription was given. Every reader reserved here
    // counts this subscription, so it cannot stop while the other triples are prepared.
    const fresh: SharedReader[] = [];
    const behind: PendingCatchUps = pending ?? new Map();
    try {
      for (const triple of triples) {
        const key = tripleKey(triple);
        const live = await this.pool.reserve(triple, fresh);
        s.startOffsets.set(key, live);
        const asked = startAt === undefined ? null : await startAt(triple, key);
        if (asked === null) continue;
        // Not past the log's end (a topic deleted and created again starts its offsets anew).
        const from = asked > live ? Math.min(asked, await this.#backend.nextOffset(triple)) : asked;
        // Every start goes through a catch-up, even one at or past the reader: the reader moves
        // on during the awaits before this subscription is registered, and a start fixed now
        // would route what it passes meanwhile to nobody. The catch-up, launched once every
        // filter is registered, hands over at once when it is not behind.
        s.startOffsets.set(key, Infinity);
        const c = behind.get(key);
        if (c === undefined) behind.set(key, { triple, from, subs: [s] });
        else c.subs.push(s);
      }
    } catch (err) {
      this.#giveBack(s, fresh);
      return this.refuse(queue, filter, `backend error: ${message(err)}`);
    }
    if (this.stopping() || this.#clients.get(queue.sub) !== queue) {
      this.#giveBack(s, fresh);
      return SUBACK_FAILURE; // client went away (or the gateway began to stop) meanwhile
    }
    if (shareKey !== undefined) {
      s.share = this.shares.join(shareKey, s);
      // Split between gateways: nothing dealt until the log says which partitions are ours.
      if (this.spread !== null) s.share.owned ??= new Set();
    }
    this.registry.upsert(s, filter);
    this.pool.start(fresh);
    if (pending === undefined) this.launch(queue, behind, { left: this.opts.maxReplayMessages });
    return s.qos;
  }

  /** Starts the catch-ups of one client (a replay's, or a resumed session's). */
  launch(queue: ClientQueue, pending: PendingCatchUps, budget: ReplayBudget): void {
    for (const { triple, from, subs } of pending.values()) {
      const c = new CatchUp(queue, triple, subs, from, budget, this.#catchUpDeps);
      let running = this.catchUps.get(queue);
      if (!running) this.catchUps.set(queue, running = new Set());
      running.add(c);
      c.run().catch((err) => {
        this.logger.warn("Catch-up failed", { client_id: queue.sub.clientId, error: err });
      }).finally(() => {
        running.delete(c);
        if (running.size === 0 && this.catchUps.get(queue) === running) {
          this.catchUps.delete(queue);
        }
      });
    }
  }

  /**
   * Logs a refusal; its SUBACK code: 0x80 for 3.1.1, `code5` (default 0x80 Unspecified error)
   * for an MQTT 5 client.
   */
  refuse(queue: ClientQueue, topic: string, reason: string, code5 = SUBACK_FAILURE): number {
    this.logger.limited("info", "Subscription refused", {
      client_id: queue.sub.clientId,
      filter: topic,
      reason,
    });
    return queue.sub.v5 != null ? code5 : SUBACK_FAILURE;
  }

  /** Undoes the reservations of a subscribe that failed, then starts (or ends) fresh readers. */
  #giveBack(s: Subscription<ClientQueue>, fresh: SharedReader[]): void {
    this.release(s);
    this.pool.start(fresh);
  }

  /** A subscription ends: every reader it held loses a subscriber and stops at none. */
  release(s: Subscription<ClientQueue>): void {
    const g = s.share;
    // The last member here: the group's position is taken while its copies still count.
    if (g !== undefined && g.members.length === 1 && g.members[0] === s) void this.spread?.end(g);
    if (g !== undefined) this.shares.leave(g, s);
    for (const k of s.startOffsets.keys()) this.pool.release(k);
    s.startOffsets.clear(); // a catch-up still running sees it ended
  }
}

function message(err: unknown): string {
  return String((err as Error)?.message ?? err);
}

/**
 * Partition operations on 0.12: each send, poll and offset request
 * carries its partition's route, looked up once (105) and cached. `NotPrimary` looks the route up
 * again and resends; `HistoryUnavailable` (the partition was recreated) re-routes and sends as new
 * work under a fresh producer id, never as a replay. Sends are idempotent-producer batches: one
 * whose reply was lost (cut connection, timeout, eviction) is sent again with the same producer
 * stamp, which the partition writes once. A caught-up poll waits in Iggy (deferred poll 106) and
 * is cancelled (108) when its caller aborts or the backend closes.
 *
 * @module
 */

import type { PollReply } from "../batch.ts";
import { Code, IggyError } from "../codes.ts";
import * as cmd from "../v11/request_bodies.ts";
import { NotSentError } from "../codes.ts";
import {
  type Address,
  type PartitionOps,
  type PartitionOpsDeps,
  uncertain,
} from "../partition_ops.ts";
import { DeferredCancelledError, type RequestOptions012 } from "./pipelined_connection.ts";
import { decodePollReply012, deferredPollBody } from "./deferred_poll.ts";
import { type ProducerStamp, ProducerTable, stampProducer } from "./producer.ts";
import { decodeRoute, type Route, routeBody, RouteCache, routeKey } from "./route.ts";
import { Code012, Status012 } from "./wire.ts";

/**
 * Wait of one deferred poll. Short enough that a reader that stops without cancelling ends
 * soon (its loop waits for the poll); long enough that the idle gap between two polls (up to
 * the reader's back-off) is rare.
 */
export const LONG_POLL_MS = 1_000;
/** Bytes a deferred poll may return. */
export const LONG_POLL_MAX_BYTES = 16 * 1024 * 1024;
/** Attempts of one partition request (re-routes and resends together). */
export const MAX_ATTEMPTS = 6;
/**
 * Deferred polls in flight at once (the server refuses more per client with 90, the SDK's
 * bound); a caught-up partition beyond them polls plainly.
 */
export const MAX_DEFERRED_POLLS = 64;
/** Partitions remembered as caught up; at the bound the oldest is forgotten (it polls plainly). */
export const MAX_CAUGHT_UP = 100_000;

/** One send across its attempts. */
interface SendState {
  readonly key: string;
  readonly frame: Uint8Array;
  stamp: ProducerStamp;
  /** An earlier attempt may have been written. */
  unsure: boolean;
  /** Renewed once after ProducerSequenceOutOfOrder. */
  reordered?: boolean;
}

function statusOf(e: unknown): number | undefined {
  return e instanceof IggyError ? e.code : undefined;
}

/** 0.12 partition operations with routes, producer stamps and long polls. */
export class PartitionOps012 implements PartitionOps {
  readonly #d: PartitionOpsDeps;
  readonly #routes = new RouteCache();
  readonly #producers: ProducerTable;
  readonly #caughtUp = new Map<string, number>();
  /** Cancels of the deferred polls in flight. */
  readonly #deferred = new Set<() => void>();
  /** Deferred polls in flight. */
  #waiting = 0;
  /** Partitions with a send in flight (the caller's rule: one at a time, checked here). */
  readonly #sending = new Set<string>();
  /** Counters a test or the status page can read. */
  readonly stats = { reroutes: 0, resends: 0, renewals: 0, longPolls: 0, capacityRefusals: 0 };

  constructor(deps: PartitionOpsDeps) {
    this.#d = deps;
    this.#producers = new ProducerTable(deps.session, { onExhausted: deps.retireSession });
  }

  /** The partition's route, from the cache or looked up (any node answers 105). */
  route(a: Address): Promise<Route> {
    const hit = this.#routes.get(routeKey(a.stream, a.topic, a.partition));
    return hit ? Promise.resolve(hit) : this.#lookUp(a);
  }

  /** Asks any node for the partition's route (105) and caches it. */
  async #lookUp(a: Address): Promise<Route> {
    const body = routeBody(a.stream, a.topic, a.partition);
    const route = decodeRoute(await this.#d.request(Code012.GET_PARTITION_ROUTE, body, false, {}));
    this.#routes.set(routeKey(a.stream, a.topic, a.partition), route);
    return route;
  }

  /**
   * Runs `op` with the partition's route; on NotPrimary or HistoryUnavailable the route is
   * looked up again and `op` runs again; other errors run it again when `retry` says so
   * (after a pause). At most {@link MAX_ATTEMPTS} attempts.
   */
  async #routed<T>(
    a: Address,
    op: (o: RequestOptions012) => Promise<T>,
    retry: (e: unknown, attempt: number) => boolean = () => false,
  ): Promise<T> {
    const key = routeKey(a.stream, a.topic, a.partition);
    for (let attempt = 1;; attempt++) {
      const route = await this.route(a);
      try {
        return await op({ context: route, node: route.primaryReplica });
      } catch (e) {
        const status = statusOf(e);
        const reroute = status === Status012.NOT_PRIMARY ||
          status === Status012.HISTORY_UNAVAILABLE;
        if (reroute) {
          this.#routes.invalidate(key);
          this.stats.reroutes++;
        }
        const again = retry(e, attempt) || reroute; // retry first: it may restamp the batch
        if (attempt >= MAX_ATTEMPTS || !again) throw e;
        // A second refusal in a row: give the cluster a moment (a new primary, a failover).
        if (!reroute || attempt > 1) await pause(attempt);
      }
    }
  }

  /**
   * Sends a SEND_MESSAGES frame of `count` messages to partition `a` as an idempotent batch;
   * resolves with the reply payload.
   */
  async send(a: Address, frame: Uint8Array, count: number): Promise<Uint8Array> {
    const key = routeKey(a.stream, a.topic, a.partition);
    // One batch in flight per partition: two batches under one stamp would be taken for one,
    // and the second dropped as its duplicate. The batcher (`batcher.ts`) is the one place that
    // orders a partition's sends; a second one here is a bug, refused before it is stamped.
    if (this.#sending.has(key)) {
      throw new Error(`Bug: a second send to ${key} while one is in flight`);
    }
    this.#sending.add(key);
    try {
      return await this.#sendNow(key, a, frame, count);
    } finally {
      this.#sending.delete(key);
    }
  }

  async #sendNow(
    key: string,
    a: Address,
    frame: Uint8Array,
    count: number,
  ): Promise<Uint8Array> {
    let stamp: ProducerStamp;
    try {
      stamp = this.#restamp(key, frame, false);
    } catch (e) {
      stamp = await this.#stampWhenLinked(e, key, a, frame);
    }
    const s: SendState = { key, frame, stamp, unsure: false };
    try {
      const reply = await this.#routed(
        a,
        (o) => this.#d.request(Code.SEND_MESSAGES, frame, true, o),
        (e) => this.#sendAgain(s, e),
      );
      this.#producers.confirm(key, s.stamp, count);
      return reply;
    } catch (e) {
      // The batch may or may not be written, or the partition refuses this producer's
      // state: later batches must not take its sequence. A refusal counts as "may be written"
      // too: a broken server (or a corrupted reply) can refuse a batch it wrote, and a later
      // batch under the same sequence would be acknowledged as its resend without being
      // written. Only a send none of whose attempts left keeps the sequence.
      const status = statusOf(e);
      if (s.unsure || !(e instanceof NotSentError)) this.#renew(key);
      if (status === Status012.PRODUCER_EPOCH_FENCED) {
        this.#d.warn?.(
          "Iggy fenced the gateway's producer on a partition; it continues under a new one",
          { ...a, producer: String(s.stamp.producerId) },
        );
      }
      throw e;
    }
  }

  /**
   * Stamps the batch after a stamp failed with `e`. A new producer id is minted from the session
   * of a live connection: when every connection was just lost (a reset uplink) there is none
   * until one is back, so the route is looked up again first, which waits for the pool's fresh
   * connection (or fails as never sent when none comes) and finds the primary after the break.
   */
  async #stampWhenLinked(
    e: unknown,
    key: string,
    a: Address,
    frame: Uint8Array,
  ): Promise<ProducerStamp> {
    if (this.#d.session() !== undefined) throw e;
    await this.#lookUp(a);
    return this.#restamp(key, frame, false);
  }

  /** Whether a send that failed with `e` goes again, restamping `s` when it must. */
  #sendAgain(s: SendState, e: unknown): boolean {
    const status = statusOf(e);
    if (status === Status012.HISTORY_UNAVAILABLE) {
      // A new incarnation of the partition: send as new work under a fresh producer.
      s.unsure = false;
      s.stamp = this.#restamp(s.key, s.frame, true);
      return true;
    }
    if (e instanceof NotSentError) return true; // nothing written: the same stamp goes again
    if (uncertain(e)) {
      s.unsure = true; // resent with the same stamp: written once
      this.stats.resends++;
      return true;
    }
    // Busy partition: nothing was written by this attempt, but an earlier uncertain one
    // may have been; only the same stamp keeps that one from being written twice.
    if (status === Status012.LIFECYCLE_BUSY) return true;
    // Our sequence is not the partition's (it lost or reordered our state): nothing was
    // written, so a fresh producer at 0 sends it once as new work. Not when an earlier
    // attempt is uncertain: it may be the one the partition holds.
    const reorder = status === Status012.PRODUCER_SEQUENCE_OUT_OF_ORDER && !s.reordered;
    if (status !== Status012.PRODUCER_UNKNOWN && !reorder) return false;
    if (s.unsure) return false;
    s.reordered ||= reorder;
    s.stamp = this.#restamp(s.key, s.frame, true);
    return true;
  }

  /** Stamps `frame` with the partition's producer, renewed first when `renew`. */
  #restamp(key: string, frame: Uint8Array, renew: boolean): ProducerStamp {
    if (renew) this.#renew(key);
    const stamp = this.#producers.stamp(key);
    stampProducer(frame, stamp);
    return stamp;
  }

  #renew(key: string): void {
    this.#producers.renew(key);
    this.stats.renewals++;
  }

  /**
   * Polls up to `count` messages from `from`. When the last poll of this partition at the
   * same offset came back empty (the reader is caught up) it waits in Iggy for new messages.
   */
  async poll(
    consumer: string,
    a: Address,
    from: number,
    count: number,
    signal?: AbortSignal,
  ): Promise<PollReply> {
    const key = routeKey(a.stream, a.topic, a.partition);
    const body = cmd.pollBody(consumer, a, from, count);
    let wait = this.#caughtUp.get(key) === from && !signal?.aborted &&
      this.#waiting < MAX_DEFERRED_POLLS;
    if (wait) this.#waiting++; // taken now: the route lookup before it is asynchronous
    const release = () => {
      if (wait) this.#waiting--;
      wait = false;
    };
    let reply: PollReply;
    try {
      reply = await this.#routed(a, (o) =>
        wait ? this.#deferredPoll(body, o, signal) : (
          this.#d.request(Code.POLL_MESSAGES, body, false, o).then(decodePollReply012)
        ), (e) => {
        if (!wait || statusOf(e) !== Status012.DEFERRED_POLL_CAPACITY_EXCEEDED) return false;
        // Iggy holds as many waiting polls of ours as it takes: poll this one plainly.
        this.#caughtUp.delete(key);
        this.stats.capacityRefusals++;
        release();
        return true;
      });
    } catch (e) {
      if (e instanceof DeferredCancelledError) {
        return { partitionId: a.partition, currentOffset: 0, messages: [] };
      }
      throw e;
    } finally {
      release();
    }
    this.#caughtUp.delete(key);
    if (reply.messages.every((m) => m.offset < from)) {
      if (this.#caughtUp.size >= MAX_CAUGHT_UP) {
        this.#caughtUp.delete(this.#caughtUp.keys().next().value!);
      }
      this.#caughtUp.set(key, from);
    }
    return reply;
  }

  async #deferredPoll(
    poll: Uint8Array,
    o: RequestOptions012,
    signal?: AbortSignal,
  ): Promise<PollReply> {
    const waitMs = this.#d.longPollMs ?? LONG_POLL_MS;
    const body = deferredPollBody(poll, { waitMs, minCount: 1, maxBytes: LONG_POLL_MAX_BYTES });
    let cancel: (() => void) | undefined;
    const onAbort = () => cancel?.();
    signal?.addEventListener("abort", onAbort, { once: true });
    this.stats.longPolls++;
    try {
      return decodePollReply012(
        await this.#d.request(Code012.POLL_MESSAGES_DEFERRED, body, false, {
          ...o,
          timeoutMs: waitMs + this.#d.timeoutMs,
          onSent: (c) => {
            if (cancel) this.#deferred.delete(cancel); // sent again on a fresh connection
            cancel = c;
            this.#deferred.add(c);
            if (signal?.aborted) c(); // aborted while it was being written
          },
        }),
      );
    } finally {
      signal?.removeEventListener("abort", onAbort);
      if (cancel) this.#deferred.delete(cancel);
    }
  }

  /** Stores a consumer offset on the partition's primary. */
  async storeOffset(consumer: string, a: Address, offset: number): Promise<void> {
    const body = cmd.storeOffsetBody(consumer, a, offset);
    await this.#routed(a, (o) => this.#d.request(Code.STORE_CONSUMER_OFFSET, body, false, o));
  }

  /** Deletes a consumer offset on the partition's primary. */
  async deleteOffset(consumer: string, a: Address): Promise<void> {
    const body = cmd.deleteOffsetBody(consumer, a);
    await this.#routed(a, (o) => this.#d.request(Code.DELETE_CONSUMER_OFFSET, body, false, o));
  }

  /** Reads a consumer offset from the partition's primary. */
  getOffset(consumer: string, a: Address): Promise<number | null> {
    const body = cmd.getOffsetBody(consumer, a);
    return this.#routed(
      a,
      async (o) =>
        cmd.decodeOffsetReply(await this.#d.request(Code.GET_CONSUMER_OFFSET, body, false, o)),
    );
  }

  /** Forgets every route (the topic was recreated, or the cluster changed). */
  invalidateRoutes(): void {
    this.#routes.invalidate();
  }

  /** Cancels every deferred poll in flight (the backend closes). */
  cancelAll(): void {
    for (const cancel of [...this.#deferred]) cancel();
    this.#deferred.clear();
  }

  /** A send's outcome is never left open: a resend carries the same stamp and is dropped. */
  mayHaveStored(): boolean {
    return false;
  }
}

function pause(attempt: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.min(20 * 2 ** attempt, 500)));
}

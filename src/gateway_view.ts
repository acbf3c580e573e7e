/**
 * A small read-only view of a running gateway: what it holds (connections, stored sessions,
 * shared readers, subscriptions, retained messages, share groups, the forwarder's lag) and
 * what it counts, read through a few methods rather than its fields. End-to-end tests read state
 * only through it, so a move inside the gateway changes this file and not the tests.
 *
 * @module
 */
import type { Gateway } from "./gateway.ts";
import type { LogBackend } from "./log/port.ts";
import type { GatewayMetrics } from "./observe/gateway_metrics.ts";
import type { SharedReader } from "./delivery/reader.ts";
import { type Triple, tripleKey } from "./delivery/mod.ts";
import type { Subscription } from "./delivery/registry.ts";
import type { ClientQueue } from "./delivery/client_queue.ts";
import type { ShareGroupStats } from "./delivery/share/stats.ts";
import type { StoredSession } from "./session/stored_sessions.ts";
import type { Forwarder } from "./forward/forwarder.ts";
import type { Uplink } from "./log/uplink_watch.ts";
import { messageOf } from "./stored/retained/retained_set.ts";

/** One shared reader, read live: each getter reads the reader as it is now. */
export class ReaderView {
  readonly #r: SharedReader;

  constructor(r: SharedReader) {
    this.#r = r;
  }

  get triple(): Triple {
    return this.#r.triple;
  }
  /** The next offset the reader routes. */
  get position(): number {
    return this.#r.position;
  }
  /** The offset stored for the reader's consumer (last settled), -1 before any. */
  get committed(): number {
    return this.#r.committedOffset;
  }
  /** The highest offset such that it and everything before it is settled. */
  get safeOffset(): number {
    return this.#r.ledger.safeOffset;
  }
  /** Messages routed and not yet settled by every subscriber. */
  get unsettled(): number {
    return this.#r.ledger.size;
  }
  get subscribers(): number {
    return this.#r.subscribers;
  }
}

/** A subscription as routed: the filter's start offsets per triple key. */
export type SubscriptionView = Pick<Subscription<ClientQueue>, "startOffsets">;

/** A subscribed client as delivery holds it: whose it is, its queued bytes, whether it is paused. */
export type SubscriberView = Pick<ClientQueue, "sub" | "paused" | "queuedBytes">;

/** The read-only view of one gateway; see the module doc. */
export class GatewayView {
  readonly #g: Gateway;

  constructor(g: Gateway) {
    this.#g = g;
  }

  /** The log behind the gateway (its port): a test reads what was stored, or stores around it. */
  get log(): LogBackend {
    return this.#g.backend;
  }

  /** The log level now (the admin action changes it at run time). */
  get logLevel(): string {
    return this.#g.logger.level;
  }

  /** The counters and gauges, by their names in code. */
  get metrics(): Readonly<GatewayMetrics> {
    return this.#g.metrics;
  }

  /** What `/metrics` serves. */
  prometheus(): string {
    return this.#g.metrics.registry.toPrometheus();
  }

  /** What `/ready` answers from. */
  readiness(): ReturnType<Gateway["readiness"]> {
    return this.#g.readiness();
  }

  /** Open connections: sockets accepted and not yet closed. */
  get connections(): number {
    return this.#g.registry.size;
  }

  /** Connections that completed CONNECT. */
  get connected(): number {
    return this.#g.registry.connected;
  }

  /** Whether `clientId` has a live (CONNECT accepted, not closed) connection here. */
  isConnected(clientId: string): boolean {
    return this.#g.registry.ownerOf(clientId) !== null;
  }

  /** A client's stored session, connected or not. */
  storedSession(clientId: string): StoredSession | undefined {
    return this.#g.sessions.get(clientId);
  }

  /** Stored sessions kept. */
  get storedSessionCount(): number {
    return this.#g.sessions.size;
  }

  /** Compactions of the stored-session record topic since start. */
  get storedSessionCompactions(): number {
    return this.#g.sessions.compactor.compactions;
  }

  /** Resolves once no read or write of the stored-session records is under way. */
  storedSessionsIdle(): Promise<void> {
    return this.#g.sessions.idle();
  }

  /** Every shared reader. */
  readers(): ReaderView[] {
    return [...this.#g.delivery.readers.values()].map((r) => new ReaderView(r));
  }

  /** The shared reader of `triple`, if one runs. */
  reader(triple: Triple): ReaderView | undefined {
    const r = this.#g.delivery.readers.get(tripleKey(triple));
    return r === undefined ? undefined : new ReaderView(r);
  }

  /** The subscriptions routed for a topic name or filter (as subscribed), if any. */
  subscriptions(topic: string): ReadonlyMap<SubscriberView, SubscriptionView> | undefined {
    return this.#g.delivery.registry.lookup(topic);
  }

  /** The subscriptions of exactly `topic` (no wildcard), if any. */
  exactSubscriptions(topic: string): ReadonlySet<SubscriptionView> | undefined {
    return this.#g.delivery.registry.exact(topic);
  }

  /** Whether any wildcard subscription is routed. */
  get hasWildcards(): boolean {
    return this.#g.delivery.registry.hasWildcards;
  }

  /** Every topic name and filter with a routed subscription. */
  routedTopics(): string[] {
    return this.#g.delivery.registry.topics();
  }

  /** Share groups with members connected. */
  shareGroups(): ShareGroupStats[] {
    return this.#g.delivery.shareStats();
  }

  /** Partitions this gateway deals to its share groups. */
  get sharePartitionsOwned(): number {
    return this.#g.delivery.sharePartitionsOwned;
  }

  /**
   * Nothing in flight: every copy routed by a shared reader or dealt to a share group is
   * acknowledged. With a PINGRESP after it, a barrier for "no more copies come".
   */
  settled(): boolean {
    return this.readers().every((r) => r.unsettled === 0) &&
      this.shareGroups().every((g) => g.lag === 0);
  }

  /** Retained messages kept. */
  get retainedCount(): number {
    return this.#g.retained.set.size;
  }

  /** Retained messages kept: topic → payload (as UTF-8). */
  retainedPayloads(): Map<string, string> {
    const out = new Map<string, string>();
    for (const e of this.#g.retained.set.entries()) {
      out.set(e.topic, new TextDecoder().decode(messageOf(e).payload));
    }
    return out;
  }

  /** Forward mode's lag and counts; null when forwarding is off. */
  get forwarder(): Pick<Forwarder, "status" | "counters"> | null {
    return this.#g.forwarder;
  }

  /** The uplink's state; null for a plain embedded log. */
  get uplink(): Pick<Uplink, "fields"> | null {
    return this.#g.uplink;
  }
}

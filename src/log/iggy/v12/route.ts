/**
 * Partition routes: GetPartitionRoute (105) and its 25-byte reply, and a
 * bounded cache of routes per partition, dropped on a refusal (NotPrimary, HistoryUnavailable).
 *
 * @module
 */

import { ByteReader, ByteWriter, DecodeError } from "../bytes.ts";
import { writeIdentifier } from "../encoding.ts";
import type { RouteContext } from "./routed_header.ts";

/** A partition's route. */
export interface Route extends RouteContext {
  readonly view: number;
  readonly partitionsCount: number;
  /** Replica id of the partition's primary node. */
  readonly primaryReplica: number;
}

/** Exact size of a route reply. */
export const ROUTE_REPLY_BYTES = 25;

/** GET_PARTITION_ROUTE body: `[stream Id][topic Id][partition:u32]`. */
export function routeBody(stream: string, topic: string, partition: number): Uint8Array {
  const w = new ByteWriter();
  writeIdentifier(w, stream);
  writeIdentifier(w, topic);
  return w.u32(partition).finish();
}

/** Decodes `[incarnation:u64][metadata_op:u64][view:u32][partitions:u32][primary:u8]`. */
export function decodeRoute(body: Uint8Array): Route {
  if (body.length !== ROUTE_REPLY_BYTES) {
    throw new DecodeError(`Iggy partition route is ${body.length} bytes, not ${ROUTE_REPLY_BYTES}`);
  }
  const r = new ByteReader(body);
  return {
    incarnation: r.u64("route incarnation"),
    ownerGeneration: 0n,
    metadataOp: r.u64("route metadata_op"),
    view: r.u32("route view"),
    partitionsCount: r.u32("route partitions_count"),
    primaryReplica: r.u8("route primary_replica"),
  };
}

/** Most routes cached; at the bound the oldest is dropped (it is looked up again when used). */
export const MAX_ROUTES = 10_000;

/** Routes by partition, oldest dropped first at {@link MAX_ROUTES}. */
export class RouteCache {
  readonly #routes = new Map<string, Route>();
  readonly #max: number;

  constructor(max = MAX_ROUTES) {
    this.#max = max;
  }

  get size(): number {
    return this.#routes.size;
  }

  get(key: string): Route | undefined {
    return this.#routes.get(key);
  }

  set(key: string, route: Route): void {
    this.#routes.delete(key);
    if (this.#routes.size >= this.#max) this.#routes.delete(this.#routes.keys().next().value!);
    this.#routes.set(key, route);
  }

  /** Forgets one route (after a refusal) or, without a key, all (the session changed). */
  invalidate(key?: string): void {
    if (key === undefined) this.#routes.clear();
    else this.#routes.delete(key);
  }
}

/** Cache key of a partition. */
export function routeKey(stream: string, topic: string, partition: number): string {
  return `${stream}\u0000${topic}\u0000${partition}`;
}

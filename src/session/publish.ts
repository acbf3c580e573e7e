/**
 * The produce algorithm's decision steps for one PUBLISH, as named steps:
 * P2 match and P3 resolve through the topic map ({@link PublishPreparer.resolve}), P4 permission
 * (`permit`) and target check, P5 partition (`#partition`), P6 envelope (`envelope`).
 * P1 (frame validation) happened in the decoder; P7 (append) is the connection's `Appender`
 * (`appender.ts`), so that appends of one read can be grouped per partition.
 *
 * Expected outcomes are values: `denied` carries its reason. No backend call is made before
 * the permission check passes (invariant).
 *
 * @module
 */
import type { PublishPacket } from "../codec/packets.ts";
import {
  checkResolution,
  type CompiledMap,
  partitionForKey,
  resolveTopic,
} from "../mapping/mod.ts";
import type { Resolution } from "../mapping/mod.ts";
import { EnvelopeMaker } from "../stored/envelope.ts";
import type { StoredTrace } from "../stored/trace_headers.ts";
import { canSend } from "../access/permissions.ts";
import type { OutgoingMessage, PartitionAddress, Principal, TopicInfo } from "../log/port.ts";
import type { TopicCache } from "../log/topic_cache.ts";

/** The address of unkeyed messages the backend places itself (`AppendRequest.balancedOver`). */
export interface BalancedAddress extends PartitionAddress {
  readonly balancedOver: number;
}

/** A publish ready to append. */
export interface PreparedAppend {
  readonly kind: "append";
  /** With `balancedOver` when the backend places the message (see {@link BalancedAddress}). */
  readonly address: PartitionAddress & { readonly balancedOver?: number };
  readonly message: OutgoingMessage;
  /** 1-based rule that matched, null for the default (per-rule hit counters). */
  readonly rule: number | null;
}

/** Why a publish is denied; its MQTT 5 reason code is decided in `publish_acks.ts`. */
export type DenialCause = "not_authorized" | "topic_name_invalid" | "quota_exceeded";

/** A publish that will not be appended. */
export interface Denied {
  readonly kind: "denied";
  readonly reason: string;
  readonly cause: DenialCause;
}

/** A publish that could not be prepared because the backend failed. */
export interface Failed {
  readonly kind: "failed";
  readonly reason: string;
}

export type Prepared = PreparedAppend | Denied | Failed;

/** Holder of the current topic map, swapped atomically on reload. */
export interface MapSource {
  readonly current: CompiledMap;
}

/**
 * What the preparer keeps per (stream, topic): the round-robin counter, and one address object
 * per partition (shared, so no allocation per publish).
 */
interface Target {
  n: number;
  readonly addresses: PartitionAddress[];
}

/** Bound on the per-topic resolution cache; cleared when full. */
const MAX_RESOLUTIONS = 10_000;

/** Prepares publishes of every connection (shared: holds the caches and round-robin state). */
export class PublishPreparer {
  #maps: MapSource;
  #topics: TopicCache;
  #resolved = new Map<string, Resolution>();
  /**
   * Each cached resolution's name check (`checkResolution`), made once per resolution: it
   * is a pure function of the names, and run for every publish it is a visible share of the
   * gateway's CPU under QoS 0 (a UTF-8 length count of stream and topic each time).
   */
  #invalid = new Map<Resolution, string | null>();
  #resolvedFor: CompiledMap | null = null;
  /**
   * One {@link Target} per (stream, topic), found by resolution per publish: every MQTT topic
   * mapped there shares its counter and addresses (a fleet's devices each publish to a topic of
   * their own, mostly mapped to a few targets).
   */
  #targets = new Map<string, Target>();
  #targetOf = new Map<Resolution, Target>();
  /** When the backend places unkeyed messages: one balanced address per resolution. */
  #balanced: Map<Resolution, BalancedAddress> | null;
  /** P6: shares a QoS 0 header map between a client's messages to a topic. */
  #envelopes = new EnvelopeMaker();

  /** `backendPlacesBalanced`: see `RemoteTuning.placesBalanced`. */
  constructor(maps: MapSource, topics: TopicCache, backendPlacesBalanced = false) {
    this.#maps = maps;
    this.#topics = topics;
    this.#balanced = backendPlacesBalanced ? new Map() : null;
  }

  /** P2+P3 with a cache: resolution is a pure function of (map, topic). */
  resolve(topic: string): Resolution {
    const map = this.#maps.current;
    if (this.#resolvedFor !== map) {
      this.#forgetResolutions();
      this.#resolvedFor = map;
    }
    let r = this.#resolved.get(topic);
    if (r === undefined) {
      r = resolveTopic(map, topic);
      if (this.#resolved.size >= MAX_RESOLUTIONS) this.#forgetResolutions();
      this.#resolved.set(topic, r);
    }
    return r;
  }

  /**
   * Runs P2–P6, in the design's order. Returns synchronously when the target's metadata is
   * cached, else a promise. `will`: the message is a connection's will (stamped `mqtt.will`);
   * `trace`: its trace context (`publish_trace.ts`).
   */
  prepare(
    p: PublishPacket,
    principal: Principal,
    clientId: string,
    will = false,
    trace?: StoredTrace,
  ): Prepared | Promise<Prepared> {
    // $SYS topics are the server's own namespace: refused.
    if (p.topic.startsWith("$SYS")) {
      return denied(`topic "${p.topic}" is reserved ($SYS)`, "topic_name_invalid");
    }
    const r = this.resolve(p.topic); // P2 match, P3 resolve
    // P4, first half: before any backend call
    const refused = permit(r, this.#invalidOf(r), principal);
    if (refused !== null) return refused;
    const cached = this.#topics.peek(r.stream, r.topic);
    if (cached !== undefined) return this.#place(p, clientId, r, cached, will, trace);
    return this.#topics.lookup(r.stream, r.topic).then(
      (info) => this.#place(p, clientId, r, info, will, trace),
      (err) => ({ kind: "failed", reason: `topic lookup failed: ${String(err?.message ?? err)}` }),
    );
  }

  /** Whether `topic` maps to a valid target under the current map (a reload's retained check). */
  hasTarget(topic: string): boolean {
    return !topic.startsWith("$SYS") && this.#invalidOf(this.resolve(topic)) === null;
  }

  /** `checkResolution(r)`, remembered while `r` is cached. */
  #invalidOf(r: Resolution): string | null {
    let invalid = this.#invalid.get(r);
    if (invalid === undefined) {
      invalid = checkResolution(r);
      this.#invalid.set(r, invalid); // bounded: cleared with the resolutions
    }
    return invalid;
  }

  /** P4 second half (the target exists), P5 partition, P6 envelope. */
  #place(
    p: PublishPacket,
    clientId: string,
    r: Resolution,
    info: TopicInfo | null,
    will: boolean,
    trace: StoredTrace | undefined,
  ): Prepared {
    if (info === null) return denied(`target ${r.stream}/${r.topic} does not exist`);
    const balanced = r.partitionKey === null && this.#balanced !== null;
    return {
      kind: "append",
      address: balanced
        ? this.#balancedAddress(r, info.partitions)
        : this.#address(r, this.#partition(r, info)),
      message: this.#envelopes.make(p, clientId, will, trace),
      rule: r.rule,
    };
  }

  /** P5: keyed → the hash Iggy uses; unkeyed → balanced round robin per topic. */
  #partition(r: Resolution, info: TopicInfo): number {
    if (r.partitionKey !== null) return partitionForKey(r.partitionKey, info.partitions);
    return this.#target(r).n++ % info.partitions;
  }

  /** Drops the resolutions and what is keyed by them (round-robin counters stay by name). */
  #forgetResolutions(): void {
    this.#resolved.clear();
    this.#invalid.clear();
    this.#targetOf.clear();
    this.#balanced?.clear();
  }

  /**
   * The address of a resolution's unkeyed messages when the backend places them: one object
   * (the batch key), so a read's unkeyed messages for a topic stay one batch, in order.
   */
  #balancedAddress(r: Resolution, partitions: number): BalancedAddress {
    const cache = this.#balanced!;
    let a = cache.get(r);
    if (a === undefined || a.balancedOver !== partitions) {
      if (cache.size >= MAX_RESOLUTIONS) cache.clear();
      a = { stream: r.stream, topic: r.topic, partition: 0, balancedOver: partitions };
      cache.set(r, a);
    }
    return a;
  }

  /** The (stream, topic) target, without building its key string on every publish. */
  #target(r: Resolution): Target {
    let target = this.#targetOf.get(r);
    if (target !== undefined) return target;
    if (this.#targetOf.size >= MAX_RESOLUTIONS) this.#targetOf.clear();
    if (this.#targets.size >= MAX_RESOLUTIONS) this.#targets.clear();
    const key = r.stream + "\u0000" + r.topic;
    target = this.#targets.get(key);
    if (target === undefined) this.#targets.set(key, target = { n: 0, addresses: [] });
    this.#targetOf.set(r, target);
    return target;
  }

  #address(r: Resolution, partition: number): PartitionAddress {
    return this.#target(r).addresses[partition] ??= {
      stream: r.stream,
      topic: r.topic,
      partition,
    };
  }

  /** The topic map in force (wildcard subscriptions resolve filters against it). */
  get map(): CompiledMap {
    return this.#maps.current;
  }

  /** The topic cache (invalidated by the connection on not-found errors). */
  get topics(): TopicCache {
    return this.#topics;
  }
}

/**
 * P4, first half: the resolved names are valid (`invalid`: `checkResolution(r)`) and the
 * principal may send there.
 */
function permit(r: Resolution, invalid: string | null, principal: Principal): Denied | null {
  if (invalid !== null) return denied(invalid, "topic_name_invalid");
  if (!canSend(principal.permissions, r.stream, r.topic)) {
    return denied(`user "${principal.username}" may not send to ${r.stream}/${r.topic}`);
  }
  return null;
}

function denied(reason: string, cause: DenialCause = "not_authorized"): Denied {
  return { kind: "denied", reason, cause };
}

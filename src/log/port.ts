/**
 * The backend port: the one interface through which the gateway talks to storage.
 * Two adapters implement it — `embedded/` (SQLite, the default) and `iggy/` (our own Iggy
 * TCP client) — and one contract suite (`tests/contract/`) runs against both.
 *
 * Names, not numeric ids, identify streams and topics: Iggy reuses numeric ids after a delete.
 * Partitions are 0-based, as in Iggy. Offsets are plain numbers (safe up to 2^53).
 *
 * @module
 */

import type { Permissions } from "../access/permissions.ts";

/** One message as the gateway hands it to the log. */
export interface OutgoingMessage {
  /** Payload bytes; never empty (the envelope replaces empty payloads). */
  readonly payload: Uint8Array;
  /** User headers, string keys and string values, each 1..255 bytes. */
  readonly headers: ReadonlyMap<string, string>;
}

/** Where a batch goes: one partition of one topic of one stream. */
export interface PartitionAddress {
  readonly stream: string;
  readonly topic: string;
  readonly partition: number;
}

/** A partition's key in maps and stored records (`stream\0topic\0partition`). */
export function partitionKey(a: PartitionAddress): string {
  return `${a.stream}\u0000${a.topic}\u0000${a.partition}`;
}

/** The partition a {@link partitionKey} names. */
export function partitionOfKey(key: string): PartitionAddress {
  const [stream, topic, partition] = key.split("\u0000");
  return { stream, topic, partition: Number(partition) };
}

/** Append of one or more messages to one partition, in order. */
export interface AppendRequest extends PartitionAddress {
  readonly messages: readonly OutgoingMessage[];
  /**
   * Set when the messages have no partition key and the topic has this many partitions: a
   * backend that {@link RemoteTuning.placesBalanced} may put the batch into any of them (and
   * says which in the receipt); `partition` is then only a hint.
   */
  readonly balancedOver?: number;
  /**
   * Called once, before the append resolves, when its messages are committed and readable but
   * not yet confirmed durable (embedded: once written to the log, before the fsync), with the first
   * message's offset. Lets live subscribers get them without waiting for the disk. A backend
   * without that distinction never calls it.
   */
  readonly onCommitted?: (baseOffset: number) => void;
  /**
   * Nobody waits for these messages to be durable (QoS 0 publishes): a backend that syncs to
   * disk may confirm them once readable and sync them a little later (embedded:
   * `embedded.qos0_sync_ms`), with the next commit someone waits for or within that interval.
   */
  readonly syncLater?: boolean;
  /**
   * Appends sharing this object keep their order across a failure: once one of them that is
   * not `syncLater` fails, a backend that queues appends writes none of the group's later ones
   * still queued (they reject). A connection that closes when an append fails passes one of its
   * own, so that nothing it sent after the failed message lands before the device's resend.
   */
  readonly orderGroup?: object;
}

/**
 * Messages still in the stored encoding, for a copy from one log to another (forwarding)
 * without decoding each into strings and a map. Message `i` is in `pieces[spans[4i]]`: its
 * headers at `[spans[4i+1], spans[4i+2])` in the header-blob encoding (`header_blob.ts`), its
 * payload at `[spans[4i+2], spans[4i+3])` (never empty). Offsets run on from `firstOffset`.
 * Pieces may be views of buffers the log holds: read them, never write them.
 */
export interface EncodedMessages {
  readonly pieces: readonly Uint8Array[];
  readonly spans: Uint32Array;
  readonly count: number;
  /** Offset of the first message (in the log they were read from). */
  readonly firstOffset: number;
  /** Append time of the first message, microseconds since the epoch. */
  readonly firstTimestampMicros: number;
  /** Sum of the payloads' bytes. */
  readonly payloadBytes: number;
  /**
   * Sum of the messages' stored bytes (payloads and encoded headers, as
   * `PartitionBytes` counts them), when the log that read them knows it.
   */
  readonly storedBytes?: number;
  /** Headers each message gains on its way to another log (see {@link CopyStamp}). */
  readonly stamp?: CopyStamp;
}

/**
 * Headers a copy of messages gains in the log it is copied to, written with each message as
 * it is sent rather than into a copy of each: `headers` as they are, and `offsetHeader` set
 * to `offsetPrefix` followed by the message's offset in the log it was read from. None of
 * these names may be among the messages' own headers.
 */
export interface CopyStamp {
  readonly headers: ReadonlyMap<string, string>;
  readonly offsetHeader: string;
  readonly offsetPrefix: string;
}

/** Append of encoded messages to one partition, in order ({@link LogBackend.appendEncoded}). */
export interface EncodedAppendRequest extends PartitionAddress {
  readonly messages: EncodedMessages;
}

/** What a confirmed append tells: the offset given to the first message of the batch. */
export interface AppendReceipt {
  /** Offset of the first message, or null when the backend confirmed without offsets. */
  readonly baseOffset: number | null;
  /** The partition the backend chose for a `balancedOver` append; absent = the one asked for. */
  readonly partition?: number;
}

/** One message read back from the log. */
export interface StoredMessage {
  readonly partition: number;
  readonly offset: number;
  /** Append time, microseconds since the epoch. */
  readonly timestampMicros: number;
  readonly payload: Uint8Array;
  readonly headers: ReadonlyMap<string, string>;
}

/** Metadata of a topic the gateway needs: how many partitions it has. */
export interface TopicInfo {
  readonly stream: string;
  readonly topic: string;
  readonly partitions: number;
  /** The topic's own retention by age (µs; 0 or absent: the backend's default, or unknown). */
  readonly messageExpiryMicros?: number;
  /**
   * The backend confirms an append before it is on disk (an Iggy topic without fsync
   * enforced): a PUBACK then means "accepted", not "on disk". Absent = on disk.
   */
  readonly acksBeforeDisk?: boolean;
}

/** Options for creating a topic when `auto_create` is on. */
export interface CreateTopicOptions {
  readonly partitions: number;
  /** Retention by age, microseconds; 0 = the backend's default. */
  readonly messageExpiryMicros?: number;
  /** Retention by size, bytes; 0 = the backend's default. */
  readonly maxTopicBytes?: number;
  /** Confirm appends only once on disk (Iggy: enforce fsync); the embedded log always does. */
  readonly durable?: boolean;
}

/** A principal the backend vouches for. */
export interface Principal {
  readonly username: string;
  readonly permissions: Permissions;
  /**
   * The user's own `client_id_pattern` (embedded `[[users]]`), `{username}` not yet filled in;
   * absent: `auth.client_id_pattern` applies.
   */
  readonly clientIdPattern?: string;
}

/** Result of checking credentials: expected outcomes are values, not exceptions. */
export type AuthResult =
  | { readonly ok: true; readonly principal: Principal }
  | {
    readonly ok: false;
    readonly reason: "bad_credentials" | "inactive" | "unavailable" | "unknown";
  };

/** Readiness of the backend, for `/ready`. */
export interface BackendHealth {
  readonly ready: boolean;
  /** Why not ready, in words an operator can act on. */
  readonly reason?: string;
  /** What the backend is connected to, in words (Iggy: server version and wire dialect). */
  readonly detail?: string;
  /** Not ready because the store is full: each cause that holds (the embedded log). */
  readonly full?: readonly FullCause[];
}

/** Which bound a full store reached: its size bound, its disk, or its catalog's. */
export type FullBound = "max_store_bytes" | "disk" | "catalog";

/** One cause of a full store, and its reason in words. */
export interface FullCause {
  readonly cause: FullBound;
  readonly reason: string;
}

/** How often a backend's sends were retried, and what that may have cost (Iggy). */
export interface ResendCounters {
  /**
   * Batches resent after an unknown outcome: 0.12 with its producer stamp (written once), 0.11
   * after a read-back did not find it stored (written once unless the read-back missed it:
   * `cut_send.ts`).
   */
  readonly resends: number;
  /** 0.12: fresh producer ids taken (lost state, recreated partition, fencing, a failed send). */
  readonly renewals: number;
  /** 0.11: cut sends a read-back found stored (confirmed, not resent). */
  readonly foundStored?: number;
  /** 0.11: cut sends whose read-back or resend failed too (each may be stored twice on retry). */
  readonly possibleDuplicates: number;
}

/** A poll's signal that asks for no wait: a read to the end of what is stored now. */
export const NO_WAIT: AbortSignal = AbortSignal.abort();

/**
 * Error raised by a backend call. `retryable` says whether trying again later can help
 * (backend down, timeout) or not (not found, unauthorized, invalid).
 */
export class BackendError extends Error {
  readonly code: BackendErrorCode;
  readonly retryable: boolean;
  /** Code "full": which bound, when the backend knows. */
  readonly bound?: FullBound;
  constructor(
    code: BackendErrorCode,
    message: string,
    options?: { cause?: unknown; bound?: FullBound },
  ) {
    super(message, options);
    this.name = "BackendError";
    this.code = code;
    if (options?.bound !== undefined) this.bound = options.bound;
    this.retryable = code === "unavailable" || code === "timeout" || code === "full";
  }
}

/** Stable error codes of the port. */
export type BackendErrorCode =
  | "not_found" // stream, topic or partition missing
  | "unauthorized" // the service identity may not do this
  | "invalid" // the request itself is wrong (name too long, empty payload…)
  | "unavailable" // backend down, closed or unreachable
  | "timeout" // no answer in time
  | "full"; // out of disk / over a size bound

/** Told of each confirmed send to a server: seconds from leaving to confirmed, messages. */
export type SendObserver = (seconds: number, messages: number) => void;

/**
 * What a backend that sends to a server (Iggy) does differently, in one place; the embedded log
 * has none of it.
 */
export interface RemoteTuning {
  /**
   * Places unkeyed (`balancedOver`) appends itself. Iggy: a topic's unkeyed messages go out in
   * one send at a time, each send to the next partition, so every send carries all that
   * gathered meanwhile; Iggy persists a topic's partitions one after another, so per-message
   * round robin made three small sends (and, with fsync, three fsyncs) of one big one.
   */
  readonly placesBalanced: boolean;
  /**
   * Holds no reference to an append's message objects beyond the encoding of its send (Iggy):
   * a caller that needs them no more once `append` is called may drop its own at once, so they
   * die young. Absent or false (the embedded log): the request's array is kept until the
   * append is committed, and emptying it is the caller's business after the receipt.
   */
  readonly releasesMessages: boolean;
  /** Resend counts since start. */
  resendCounters(): ResendCounters;
  /**
   * Has `observe` called once per confirmed send to the server, with the time from the send
   * leaving to its confirmation and the messages it carried.
   */
  watchSends(observe: SendObserver): void;
}

/**
 * A log's consumer groups, as the split of a topic's partitions between gateways that serve one
 * shared subscription (Iggy; absent on the embedded log, where one gateway has them all).
 */
export interface GroupMembership {
  /** Members the group has now, over every gateway (0 when it does not exist). */
  members(stream: string, topic: string, group: string): Promise<number>;
  /** Joins the group `group` of stream/topic, making it when it does not exist. */
  join(stream: string, topic: string, group: string): Promise<void>;
  /** The partitions the group gives this gateway now; null when it is not (or no longer) a member. */
  assigned(stream: string, topic: string, group: string): Promise<number[] | null>;
  /** Leaves the group (its partitions go to the other members at once). */
  leave(stream: string, topic: string, group: string): Promise<void>;
}

/** The backend port. Every method may reject with {@link BackendError}. */
export interface LogBackend {
  /** "embedded" (a {@link LocalLog}) or "iggy". */
  readonly kind: string;
  /** What a backend that sends to a server does differently; absent on the embedded log. */
  readonly remote?: RemoteTuning;
  /** Consumer groups across gateways (Iggy); absent: this gateway serves every partition. */
  readonly groups?: GroupMembership;
  /** Opens files/connections. Resolves when usable; rejects with a clear error otherwise. */
  open(): Promise<void>;
  /** Flushes what is pending and releases every resource. Idempotent. */
  close(): Promise<void>;
  /** Current readiness (cheap; no I/O). */
  health(): BackendHealth;

  /** Verifies credentials and returns the principal with its permissions. */
  authenticate(username: string, password: string): Promise<AuthResult>;
  /**
   * The user of that name with its permissions, no password checked: for a principal named by
   * a verified client certificate. Fails with `unknown` when there is no such user.
   */
  principalOf(username: string): Promise<AuthResult>;

  /** Topic metadata, or null when the stream or topic does not exist. */
  getTopic(stream: string, topic: string): Promise<TopicInfo | null>;
  /**
   * Every topic of every stream this identity can see (wildcard subscriptions match them
   * against name patterns).
   */
  listTopics(): Promise<TopicInfo[]>;
  /** Creates the stream (if missing) and the topic (if missing); returns its metadata. */
  createTopic(stream: string, topic: string, options: CreateTopicOptions): Promise<TopicInfo>;

  /**
   * Appends messages to one partition. Resolves only when the backend confirms the append
   * (embedded: committed and fsynced). Concurrent calls may be coalesced into one write.
   */
  append(request: AppendRequest): Promise<AppendReceipt>;

  /**
   * Reads up to `count` messages with offset ≥ `fromOffset`, in offset order. A backend may
   * wait a little for new messages when there are none yet (Iggy 0.12: a deferred poll of
   * about a second); `signal` ends such a wait at once with an empty result, and one already
   * aborted asks for none: what is there now ({@link NO_WAIT}).
   */
  poll(
    address: PartitionAddress,
    fromOffset: number,
    count: number,
    signal?: AbortSignal,
  ): Promise<StoredMessage[]>;
  /** The offset the next appended message of this partition will get. */
  nextOffset(address: PartitionAddress): Promise<number>;
  /** Appends encoded messages as {@link append} would append them decoded (the forwarder's). */
  appendEncoded(request: EncodedAppendRequest): Promise<AppendReceipt>;
  /** Stores `offset` (the last settled offset) for a consumer on a partition. */
  storeOffset(consumer: string, address: PartitionAddress, offset: number): Promise<void>;
  /** The stored offset for a consumer on a partition, or null when none is stored. */
  getOffset(consumer: string, address: PartitionAddress): Promise<number | null>;
  /**
   * Deletes the stored offset of a consumer on a partition; resolves as well when none is
   * stored.
   */
  deleteOffset(consumer: string, address: PartitionAddress): Promise<void>;
}

/**
 * What the backend asks of one partition — send a batch, poll, store and read a consumer
 * offset — as each dialect does it: 0.11 in lockstep on any service connection
 * (`v11/partitions.ts`), 0.12 routed to the partition's primary with producer stamps and long
 * polls (`v12/partitions.ts`). The dialect in use makes its own ({@link PartitionOps} by
 * `Dialect.partitionOps`), so the backend never asks which dialect it speaks.
 *
 * @module
 */
import type { PollReply } from "./batch.ts";
import { IggyConnectionError, IggyError, IggyTimeoutError, Status } from "./codes.ts";
import { NotSentError } from "./codes.ts";
import type { RequestOptions012 } from "./v12/pipelined_connection.ts";

/** Where a partition request goes. */
export interface Address {
  readonly stream: string;
  readonly topic: string;
  readonly partition: number;
}

/**
 * Sends one request on some connection: the shape of the pool's and the cluster's `request`
 * (`pool.ts`, `cluster.ts`) and of what partition operations are built on. With `framed`,
 * `body` is the whole frame, its first 256 bytes room for the header; `o` only means something
 * on 0.12.
 */
export type PoolRequest = (
  code: number,
  body?: Uint8Array,
  framed?: boolean,
  o?: RequestOptions012,
) => Promise<Uint8Array>;

/** What a dialect's partition operations are built on. */
export interface PartitionOpsDeps {
  readonly request: PoolRequest;
  /** Session of a live registration (0.12 producer ids are minted from it). */
  readonly session: () => bigint | undefined;
  readonly timeoutMs: number;
  /** How long a caught-up 0.12 poll waits in Iggy (default: `v12/partitions.ts`). */
  readonly longPollMs?: number;
  /** Replaces a 0.12 session that minted all its producer ids by a fresh Register. */
  readonly retireSession?: (session: bigint) => void;
  /** Where a warning goes (a fenced producer). */
  readonly warn?: (message: string, fields: Record<string, unknown>) => void;
}

/** One dialect's partition operations. */
export interface PartitionOps {
  /**
   * Sends an encoded SEND_MESSAGES frame of `count` messages; the reply body. At most one send
   * per partition at a time: the caller's rule (the batcher keeps it).
   */
  send(a: Address, frame: Uint8Array, count: number): Promise<Uint8Array>;
  /** Polls up to `count` messages from `from`; `signal` cancels a long poll. */
  poll(
    consumer: string,
    a: Address,
    from: number,
    count: number,
    signal?: AbortSignal,
  ): Promise<PollReply>;
  storeOffset(consumer: string, a: Address, offset: number): Promise<void>;
  getOffset(consumer: string, a: Address): Promise<number | null>;
  /** Deletes a consumer offset (Iggy answers 3021 when none is stored). */
  deleteOffset(consumer: string, a: Address): Promise<void>;
  /**
   * Whether a send that failed with `e` may still have been stored, so that the device's
   * retry can store it twice (0.11: an uncertain outcome; 0.12: never, resends are
   * deduplicated by the producer stamp).
   */
  mayHaveStored(e: unknown): boolean;
  /** Sends resent and producer states renewed so far (0.11: none). */
  readonly stats: { readonly resends: number; readonly renewals: number };
  /** Ends every request that waits in Iggy (long polls). */
  cancelAll(): void;
}

/**
 * Is the outcome of a request that failed with `e` unknown (it may have been applied)? Not
 * for a {@link NotSentError}: that request never left the gateway.
 */
export function uncertain(e: unknown): boolean {
  if (e instanceof NotSentError) return false;
  return e instanceof IggyConnectionError || e instanceof IggyTimeoutError ||
    (e instanceof IggyError && e.code === Status.TRANSIENT_NOT_COMMITTED);
}

/**
 * Idempotent producers on 0.12: the producer section in bytes 52..72
 * of a batch header, the batch checksum resealed over it, and the sequence of each partition.
 * The partition writes a batch of one (producer, epoch, base sequence) once, also when it is
 * sent again after a lost reply or a reconnect: that makes a resend effectively once.
 *
 * @module
 */

import { BATCH_HEADER_SIZE, FRAME_HEADER_SIZE } from "../batch.ts";
import { HEADER_SIZE } from "../header_layout.ts";
import { xxh3_64 } from "../../../base/xxhash.ts";
import { IggyError } from "../codes.ts";

/** Identity of one batch of an idempotent producer. */
export interface ProducerStamp {
  /** ≤ 2^63 − 1. */
  readonly producerId: bigint;
  /** ≤ 32767. */
  readonly epoch: number;
  /** Sequence of the batch's first message, ≤ 2^31 − 1 (wraps to 0). */
  readonly baseSequence: number;
}

const PRODUCER_AT = 52;
const SEQUENCE_MAX = 0x7fff_ffff;

/** Offset of the batch header in a SEND_MESSAGES frame (header + metadata). */
export function batchOffset(frame: Uint8Array): number {
  const v = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  return HEADER_SIZE + 4 + v.getUint32(HEADER_SIZE, true);
}

/**
 * Writes the producer section into the batch of a SEND_MESSAGES frame and reseals the batch
 * checksum: XXH3-64 over the 44 fixed header fields, `01 ‖ id ‖ epoch ‖ base_sequence`, then
 * every frame checksum in order.
 */
export function stampProducer(frame: Uint8Array, p: ProducerStamp): void {
  const at = batchOffset(frame);
  const v = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  frame.fill(0, at + PRODUCER_AT, at + PRODUCER_AT + 20);
  frame[at + PRODUCER_AT] = 1;
  v.setBigUint64(at + 56, p.producerId, true);
  v.setUint16(at + 64, p.epoch, true);
  v.setUint32(at + 68, p.baseSequence, true);
  const count = v.getUint32(at + 48, true);
  const sums = new Uint8Array(count * 8);
  let pos = at + BATCH_HEADER_SIZE;
  for (let i = 0; i < count; i++) {
    sums.set(frame.subarray(pos, pos + 8), i * 8);
    const headers = v.getUint32(pos + 32, true);
    const payload = v.getUint32(pos + 36, true);
    pos += FRAME_HEADER_SIZE + headers + payload;
  }
  const section = new Uint8Array(15);
  const sv = new DataView(section.buffer);
  section[0] = 1;
  sv.setBigUint64(1, p.producerId, true);
  sv.setUint16(9, p.epoch, true);
  sv.setUint32(11, p.baseSequence, true);
  // The 44 fixed bytes skip the checksum field itself (40..48).
  const sum = xxh3_64(frame.subarray(at, at + 40), frame.subarray(at + 48, at + 52), section, sums);
  v.setBigUint64(at + 40, sum, true);
}

/** The next base sequence after a batch of `count` messages (wraps past 2^31 − 1 to 0). */
export function advanceSequence(sequence: number, count: number): number {
  return (sequence + count) % (SEQUENCE_MAX + 1);
}

/** Most partitions whose producer state is kept; at the bound the oldest is dropped (its next
 * batch then starts a fresh producer id at sequence 0, which is always safe). */
export const MAX_PRODUCER_STATES = 100_000;

const ID_INDEX_BITS = 20n;
const ID_MAX = (1n << 63n) - 1n;
/** Ids one session can mint (`index` < 2^20). */
export const IDS_PER_SESSION = 1 << 20;
/**
 * Sessions whose next index is remembered. Past the bound the oldest is forgotten and no
 * longer minted from (its ids could otherwise be minted twice): a connection still on it gets
 * a fresh session first.
 */
export const MAX_MINT_SESSIONS = 1024;

interface ProducerState {
  producerId: bigint;
  sequence: number;
}

/** Options of a {@link ProducerTable}. */
export interface ProducerTableOptions {
  /** Partitions whose state is kept (default {@link MAX_PRODUCER_STATES}). */
  readonly maxStates?: number;
  /** Ids per session (default {@link IDS_PER_SESSION}; tests lower it). */
  readonly idsPerSession?: number;
  /** Called with a session that cannot mint any more: it must be replaced by a fresh Register. */
  readonly onExhausted?: (session: bigint) => void;
}

/** A session that cannot mint a producer id (91 `ProducerIdsExhausted`, client-side). */
export class ProducerIdsExhaustedError extends IggyError {
  constructor(session: bigint, why: string) {
    super(91, `Producer ids of Iggy session ${session} are ${why}; the gateway logs in afresh`);
    this.name = "ProducerIdsExhaustedError";
  }
}

/**
 * The gateway's idempotent producer state, per partition: the producer id and the next base
 * sequence. Ids are minted as the Rust SDK does, `session << 20 | index`, from the session of
 * a live registration (unique in the cluster). The next index is kept per session and never
 * reset: connections on two sessions can take turns being the live one. The batcher keeps
 * one batch in flight per partition, which the sequence needs.
 */
export class ProducerTable {
  readonly #states = new Map<string, ProducerState>();
  readonly #session: () => bigint | undefined;
  readonly #max: number;
  readonly #idsPerSession: bigint;
  readonly #onExhausted: (session: bigint) => void;
  /** Next index per session, oldest session first. */
  readonly #next = new Map<bigint, bigint>();
  /** Sessions at or below this one were forgotten (sessions grow: Register's commit op). */
  #forgottenUpTo = -1n;

  constructor(session: () => bigint | undefined, o: ProducerTableOptions = {}) {
    this.#session = session;
    this.#max = o.maxStates ?? MAX_PRODUCER_STATES;
    this.#idsPerSession = BigInt(o.idsPerSession ?? IDS_PER_SESSION);
    this.#onExhausted = o.onExhausted ?? (() => {});
  }

  get size(): number {
    return this.#states.size;
  }

  /** The stamp for the next batch to partition `key` (not advanced until confirmed). */
  stamp(key: string): ProducerStamp {
    let s = this.#states.get(key);
    if (!s) {
      s = { producerId: this.#mint(), sequence: 0 };
      if (this.#states.size >= this.#max) this.#states.delete(this.#states.keys().next().value!);
      this.#states.set(key, s);
    }
    return { producerId: s.producerId, epoch: 0, baseSequence: s.sequence };
  }

  /** A batch of `count` messages was written: the next one follows it. */
  confirm(key: string, stamp: ProducerStamp, count: number): void {
    const s = this.#states.get(key);
    if (s && s.producerId === stamp.producerId) {
      s.sequence = advanceSequence(stamp.baseSequence, count);
    }
  }

  /**
   * A fresh producer id at sequence 0 for `key`: after the partition lost our state
   * (ProducerUnknown), was recreated (HistoryUnavailable), or a send ended uncertain.
   */
  renew(key: string): void {
    this.#states.delete(key);
  }

  #mint(): bigint {
    const session = this.#session();
    if (session === undefined) throw new RangeError("No Iggy session to mint a producer id from");
    let index = this.#next.get(session);
    if (index === undefined) {
      if (session <= this.#forgottenUpTo) return this.#exhausted(session, "no longer tracked");
      if (this.#next.size >= MAX_MINT_SESSIONS) {
        const [oldest] = this.#next.keys();
        this.#next.delete(oldest);
        if (oldest > this.#forgottenUpTo) this.#forgottenUpTo = oldest;
      }
      index = 0n;
    }
    if (index >= this.#idsPerSession) return this.#exhausted(session, "exhausted");
    this.#next.set(session, index + 1n);
    return ((session << ID_INDEX_BITS) | index) & ID_MAX;
  }

  #exhausted(session: bigint, why: string): never {
    this.#onExhausted(session);
    throw new ProducerIdsExhaustedError(session, why);
  }
}

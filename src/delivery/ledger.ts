/**
 * The ACK ledger of one shared reader (POLL ≠ ACK). Polling a message is not
 * delivering it: every polled message gets an entry counting its unsettled copies, and the
 * safe offset advances only over the contiguous prefix of settled entries.
 *
 * A message is settled when every QoS 1 copy was PUBACKed or struck (client gone/evicted)
 * and every QoS 0 copy was written or dropped (QoS 0 copies settle when enqueued).
 *
 * @module
 */

/** One polled message awaiting its copies. */
export interface LedgerEntry {
  readonly offset: number;
  /** Unsettled copies. */
  pending: number;
}

/** Ordered ledger with contiguous safe-offset advancement. */
export class AckLedger {
  #entries: LedgerEntry[] = [];
  #head = 0;
  /** Highest offset below which (inclusive) everything is settled; -1 = none yet. */
  #safe: number;

  constructor(safeOffset: number) {
    this.#safe = safeOffset;
  }

  /** The highest offset such that it and everything before it is settled. */
  get safeOffset(): number {
    return this.#safe;
  }

  /** Entries not yet passed by the safe offset. */
  get size(): number {
    return this.#entries.length - this.#head;
  }

  /**
   * Records a polled message with `copies` unsettled copies. Offsets must increase.
   * Returns the entry (for copies to settle later), or null when already settled.
   */
  record(offset: number, copies: number): LedgerEntry | null {
    if (copies === 0 && this.size === 0) {
      if (offset > this.#safe) this.#safe = offset;
      return null;
    }
    const e: LedgerEntry = { offset, pending: copies };
    this.#entries.push(e);
    if (copies === 0) this.#advance();
    return e;
  }

  /** Settles one copy of `entry` (PUBACK, written, dropped or struck). */
  settle(entry: LedgerEntry): void {
    if (entry.pending <= 0) return;
    entry.pending--;
    if (entry.pending === 0) this.#advance();
  }

  #advance(): void {
    while (this.#head < this.#entries.length && this.#entries[this.#head].pending === 0) {
      this.#safe = this.#entries[this.#head].offset;
      this.#head++;
    }
    if (this.#head === this.#entries.length) {
      this.#entries = [];
      this.#head = 0;
    } else if (this.#head > 4096 && this.#head * 2 > this.#entries.length) {
      this.#entries = this.#entries.slice(this.#head);
      this.#head = 0;
    }
  }
}

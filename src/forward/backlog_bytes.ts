/**
 * A lane's backlog in bytes (payloads and encoded headers), from the store's own count of each
 * partition's bytes ({@link PartitionBytes}) and the bytes of each confirmed send: no read per
 * look. Only where neither tells (a restart with messages both forwarded and not still
 * retained, a skip of messages whose bytes are not known) is the backlog read once to count
 * it, in the background and a batch at a time, so the lane sends meanwhile.
 *
 * @module
 */
import type { EncodedMessages, PartitionAddress } from "../log/port.ts";
import type { LocalLog, PartitionBytes } from "../log/local_log.ts";

/** Messages and bytes read per batch when the backlog is counted. */
const COUNT_BATCH = { messages: 1_000, bytes: 1 << 20 } as const;

/** The bytes still to send of one partition. */
export class BacklogBytes {
  /**
   * The store's appended-bytes count at the lane's position is `#base + #sent`; null while not
   * known.
   */
  #base: number | null = null;
  /** Stored bytes of every confirmed send of the lane (never falls). */
  #sent = 0;
  /** The partition's appended bytes as last seen. */
  #appended = 0;
  /** Bumped by each skip: a count begun before one is dropped. */
  #skips = 0;
  #counting: Promise<void> | undefined;

  /** Bytes still to send as last seen (0 while not known). */
  get bytes(): number {
    if (this.#base === null) return 0;
    return Math.max(0, this.#appended - this.#base - this.#sent);
  }

  /** A look at the partition with the lane at `next`; starts a count when it is needed. */
  observe(extent: PartitionBytes, next: number, count: () => Promise<void>): void {
    this.#appended = extent.appendedBytes;
    // Nothing retained is forwarded yet: the backlog is every retained byte.
    if (next <= extent.start) this.#base = extent.appendedBytes - extent.retainedBytes - this.#sent;
    else if (extent.next <= next) this.#base = extent.appendedBytes - this.#sent; // caught up
    else if (this.#base === null) {
      this.#counting ??= count().catch(() => {}).finally(() => this.#counting = undefined);
    }
  }

  /** A newer look at the appended bytes only (while a send waits). */
  seen(appendedBytes: number): void {
    this.#appended = Math.max(this.#appended, appendedBytes);
  }

  /** A send was confirmed. */
  sent(run: EncodedMessages): void {
    if (run.storedBytes === undefined) this.skipped();
    else this.#sent += run.storedBytes;
  }

  /** The lane's position moved past messages whose bytes are not known (a gap, found upstream). */
  skipped(): void {
    this.#base = null;
    this.#skips++;
  }

  /** Resolves when no count is under way. */
  idle(): Promise<void> {
    return this.#counting ?? Promise.resolve();
  }

  /**
   * Counts the bytes of `[next, extent.next)` with reads of the local log, yielding to the event
   * loop between batches; gives up on a skip, a gap, or when `stopping()`.
   */
  async count(
    local: Pick<LocalLog, "pollEncoded">,
    address: PartitionAddress,
    next: number,
    extent: PartitionBytes,
    stopping: () => boolean,
  ): Promise<void> {
    const skips = this.#skips;
    const sentBefore = this.#sent;
    let bytes = 0;
    for (let from = next; from < extent.next;) {
      if (stopping() || this.#skips !== skips) return;
      const want = Math.min(COUNT_BATCH.messages, extent.next - from);
      const run = await local.pollEncoded(address, from, want, COUNT_BATCH.bytes);
      if (run === null || run.firstOffset !== from || run.storedBytes === undefined) return;
      bytes += run.storedBytes;
      from = run.firstOffset + run.count;
      await new Promise((r) => setTimeout(r, 0)); // the store answers at once: let others run
    }
    // A look that found the figure exactly meanwhile (caught up, nothing forwarded) stands.
    if (this.#skips === skips && this.#base === null) {
      this.#base = extent.appendedBytes - bytes - sentBefore;
    }
  }
}

/**
 * How many messages each poll asks Iggy for. Iggy answers a poll in one frame, bounded by
 * `MAX_FRAME_BYTES`, and a poll is bounded by count only. Sized for the largest message the
 * gateway may append (`limits.max_packet_bytes`), a poll asks for few; sized so for small
 * messages too, a reader would make many times the round trips it needs. So each
 * partition's polls are sized from the largest message it returned lately (the first at the safe
 * count; what a large message taught halves with each poll after it, so a partition that mixes
 * sizes stays near the safe count instead of asking too much again and again); a reply that still
 * comes out too large (larger messages arrived) is read past by the frame reader, unkept, and
 * asked again at the safe count, on the same connection.
 *
 * @module
 */
import type { PollReply } from "./batch.ts";
import { IggyError, Status } from "./codes.ts";
import { maxPollMessages, MESSAGE_OVERHEAD_BYTES, POLL_REPLY_BYTES } from "./frame_reader.ts";

/** Partitions whose last message size is remembered; at the bound the oldest is forgotten. */
const MAX_PARTITIONS = 10_000;

/** Per partition, the largest message it returned lately, and the count that follows from it. */
export class PollSizes {
  /** The count when every message may be as large as the gateway appends them. */
  readonly safe: number;
  #largest = new Map<string, number>();
  /** Polls asked again at the safe count (a reply was too large). */
  retries = 0;

  constructor(maxMessageBytes: number | undefined) {
    this.safe = maxPollMessages(maxMessageBytes);
  }

  /** The count to ask for now: at most `requested`, at least the safe count. */
  count(key: string, requested: number): number {
    const largest = this.#largest.get(key);
    if (largest === undefined) return Math.min(requested, this.safe);
    const fits = Math.floor(POLL_REPLY_BYTES / (largest + MESSAGE_OVERHEAD_BYTES));
    return Math.min(requested, Math.max(this.safe, fits));
  }

  /** Polls through `ask` at the sized count; a reply too large is asked again at the safe count. */
  async poll(
    key: string,
    requested: number,
    ask: (count: number) => Promise<PollReply>,
  ): Promise<PollReply> {
    const count = this.count(key, requested);
    let reply: PollReply;
    try {
      reply = await ask(count);
    } catch (e) {
      const safe = Math.min(requested, this.safe);
      if (!(e instanceof IggyError && e.code === Status.REPLY_TOO_LARGE) || count <= safe) throw e;
      this.#largest.delete(key);
      this.retries++;
      reply = await ask(safe);
    }
    this.#seen(key, reply);
    return reply;
  }

  #seen(key: string, reply: PollReply): void {
    if (this.safe === Infinity || reply.messages.length === 0) return;
    let largest = 0;
    for (const m of reply.messages) {
      const bytes = m.payload.length + m.userHeaders.length;
      if (bytes > largest) largest = bytes;
    }
    const before = this.#largest.get(key);
    if (before !== undefined && before / 2 > largest) largest = before / 2;
    this.#largest.delete(key); // re-inserted last: the oldest is forgotten first
    if (this.#largest.size >= MAX_PARTITIONS) {
      this.#largest.delete(this.#largest.keys().next().value!);
    }
    this.#largest.set(key, largest);
  }
}

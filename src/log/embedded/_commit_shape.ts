/**
 * What one transaction of the group commit (_group_commit.ts) holds: its appends, grouped into
 * one run per partition, and only as many as the message log has room for
 * (`MessageLog.roomFor`). A burst bigger than what is left of the active segment goes as
 * several transactions, the first filling that segment, the next rolling to a new one, instead
 * of one transaction refused whole while the store has room. Cuts fall between appends, never
 * inside one: an append (one sender's messages for one partition, one offset range, resolved
 * once) stays in one transaction, so each message is in one checksummed record and each append
 * resolves after the fsync that covers all of it. Only what fits nowhere (the bound reached) is
 * refused.
 *
 * @module
 */
import type { OutgoingMessage } from "../port.ts";
import type { TopicState } from "./_catalog.ts";
import { headersMaxBytes } from "../header_blob.ts";
import { RECORD_HEADER_BYTES } from "./_batch.ts";
import { LOG_RECORD_HEADER_BYTES } from "./_log_record.ts";

/** What of a queued append the cut needs. */
interface Sized {
  readonly messages: readonly OutgoingMessage[];
}

/** What of a queued append its run needs. */
interface Placed extends Sized {
  readonly state: TopicState;
  readonly partition: number;
}

/** The appends of one partition within one transaction, in arrival order. */
export interface TransactionRun<A extends Placed> {
  readonly state: TopicState;
  readonly partition: number;
  readonly appends: A[];
  count: number;
}

/** Groups a batch's appends by (topic, partition), keeping arrival order within each. */
export function groupRuns<A extends Placed>(batch: readonly A[]): TransactionRun<A>[] {
  const runs: TransactionRun<A>[] = [];
  const byTopic = new Map<TopicState, (TransactionRun<A> | undefined)[]>();
  for (const a of batch) {
    let perPartition = byTopic.get(a.state);
    if (!perPartition) byTopic.set(a.state, perPartition = []);
    let run = perPartition[a.partition];
    if (!run) {
      run = { state: a.state, partition: a.partition, appends: [], count: 0 };
      perPartition[a.partition] = run;
      runs.push(run);
    }
    run.appends.push(a);
    run.count += a.messages.length;
  }
  return runs;
}

/**
 * Bytes an append takes in a transaction, never fewer: its messages' records (headers at their
 * largest encoding) and a log record header of its own (a transaction has one per partition,
 * so never more than one per append).
 */
export function appendBytesBound(append: Sized): number {
  let bytes = LOG_RECORD_HEADER_BYTES;
  for (const m of append.messages) {
    bytes += RECORD_HEADER_BYTES + headersMaxBytes(m.headers) + m.payload.length;
  }
  return bytes;
}

/**
 * How many of `batch`'s first appends one transaction takes: as many as fit the room
 * `roomFor(first)` gives for the first one's bytes. When the first finds no room (the store at
 * its bound), it goes with the appends after it that find none either, to be refused together
 * as before, not one transaction each.
 */
export function appendsThatFit(
  batch: readonly Sized[],
  roomFor: (first: number) => number,
): number {
  let total = appendBytesBound(batch[0]);
  const room = roomFor(total);
  let n = 1;
  if (total > room) {
    while (n < batch.length) {
      const bytes = appendBytesBound(batch[n]);
      if (bytes <= roomFor(bytes)) break;
      n++;
    }
    return n;
  }
  for (; n < batch.length; n++) {
    const more = total + appendBytesBound(batch[n]);
    if (more > room) break;
    total = more;
  }
  return n;
}

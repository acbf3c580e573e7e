/**
 * What a retention pass deleted, for the operator: per partition the messages and bytes dropped
 * (tallied as they go), then per topic with the consumers whose stored offset lay before the
 * last dropped message — stored sessions, share groups, the forwarder — that is, who had not
 * read all of it. The consumers are found by one scan of the consumer-offset table per
 * partition the pass touched, and only after a pass that deleted something.
 *
 * @module
 */
import type { RetentionDeleted } from "../local_log.ts";
import type { Catalog } from "./_catalog.ts";
import type { PartitionLog } from "./_log_index.ts";
import type { ReadStatements } from "./_statements.ts";

/** Per partition: messages and bytes one pass dropped. */
export type RetentionTally = Map<PartitionLog, { messages: number; bytes: number }>;

/** Adds a drop of `messages` to the tally; `bytesBefore`: the partition's bytes before it. */
export function tallyDrop(
  tally: RetentionTally | undefined,
  p: PartitionLog,
  messages: number,
  bytesBefore: number,
): void {
  if (tally === undefined || messages === 0) return;
  const t = tally.get(p) ?? { messages: 0, bytes: 0 };
  t.messages += messages;
  t.bytes += bytesBefore - p.bytes;
  tally.set(p, t);
}

/** The tally per topic, with the consumers that had not read what went. */
export function retentionReport(
  tally: RetentionTally,
  catalog: Catalog,
  reads: ReadStatements | undefined,
): RetentionDeleted[] {
  type Sum = { -readonly [K in keyof RetentionDeleted]: RetentionDeleted[K] };
  const byTopic = new Map<number, Sum & { unread: Set<string> }>();
  for (const [p, t] of tally) {
    const state = catalog.byId(p.topicId);
    if (state === undefined) continue;
    let r = byTopic.get(p.topicId);
    if (r === undefined) {
      const { stream, topic } = state;
      r = { stream, topic, messages: 0, bytes: 0, unreadBy: [], unread: new Set() };
      byTopic.set(p.topicId, r);
    }
    r.messages += t.messages;
    r.bytes += t.bytes;
    // A stored offset is the last message read: below start − 1, a dropped one was unread.
    const rows = reads?.selectConsumersBehind.all(p.topicId, p.partition, p.start - 1) ?? [];
    for (const row of rows) r.unread.add(String(row.consumer));
  }
  return [...byTopic.values()].map(({ unread, ...r }) => ({ ...r, unreadBy: [...unread] }));
}

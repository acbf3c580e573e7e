/**
 * A sender's order across a failed append (`AppendRequest.orderGroup`): once an append of a
 * group fails, the group commit writes none of the group's appends queued after it.
 */
import assert from "node:assert/strict";
import { GroupCommit, type PendingAppend } from "./_group_commit.ts";
import type { MessageLog } from "./_message_log.ts";
import type { TopicState } from "./_catalog.ts";
import type { WriterLink } from "./_writer_link.ts";
import { BackendError } from "../port.ts";

const STATE = { id: 1 } as unknown as TopicState;

/** A log whose first write fails (the disk is full) and that records what it writes. */
function failingOnceLog() {
  let next = 0;
  let failures = 1;
  let release: () => void = () => {};
  const written: string[] = [];
  const log = {
    written,
    /** The first write waits for this, so that later appends queue behind it. */
    firstWrite: new Promise<void>((r) => release = r),
    release: () => release(),
    append: async (data: Uint8Array, runs: { count: number }[]) => {
      await log.firstWrite;
      if (failures-- > 0) throw new BackendError("full", "The disk is full");
      written.push(new TextDecoder().decode(data).replace(/[^a-z0-9]/g, ""));
      return runs.map((r) => (next += r.count) - r.count);
    },
    sync: () => Promise.resolve(),
    roomFor: () => Infinity,
  };
  return log;
}

function append(commit: GroupCommit, body: string, group: object, syncLater = false) {
  return new Promise<number>((resolve, reject) => {
    commit.enqueue({
      state: STATE,
      partition: 0,
      messages: [{ payload: new TextEncoder().encode(body), headers: new Map() }],
      syncLater,
      orderGroup: group,
      resolve,
      reject,
    } as PendingAppend);
  });
}

Deno.test("GroupCommit: after an append of an order group fails, its queued appends are rejected unwritten; other groups are written", async () => {
  const log = failingOnceLog();
  const commit = new GroupCommit(
    {} as WriterLink,
    log as unknown as MessageLog,
    100,
    () => 0,
    (e) => e,
  );
  const device = {};
  const other = {};
  const first = append(commit, "aaa", device);
  await new Promise((r) => setTimeout(r, 0)); // the first transaction is being written
  const later = [append(commit, "bbb", device), append(commit, "ccc", device)];
  const others = append(commit, "zzz", other);
  log.release();
  await assert.rejects(first, /disk is full/);
  for (const p of later) await assert.rejects(p, /earlier append of the same connection failed/);
  assert.equal(await others, 0);
  assert.equal(log.written.length, 1);
  assert.match(log.written[0], /zzz/);
  assert.doesNotMatch(log.written[0], /bbb|ccc/);
  // The device's next connection is a new group: written again.
  assert.equal(await append(commit, "ddd", {}), 1);
  await commit.drain();
});

Deno.test("GroupCommit: a failed QoS 0 append (syncLater) does not stop its group", async () => {
  const log = failingOnceLog();
  const commit = new GroupCommit(
    {} as WriterLink,
    log as unknown as MessageLog,
    100,
    () => 0,
    (e) => e,
    undefined,
    10,
  );
  const device = {};
  const first = append(commit, "aaa", device, true);
  await new Promise((r) => setTimeout(r, 0));
  const later = append(commit, "bbb", device);
  log.release();
  await assert.rejects(first, /disk is full/);
  assert.equal(await later, 0);
  await commit.drain();
});

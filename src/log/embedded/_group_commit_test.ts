/**
 * Group commit's deferred fsync (`embedded.qos0_sync_ms`): a transaction of QoS 0 appends only
 * is confirmed once written and synced by the next transaction someone waits for, or by the
 * interval's timer; one with anything acknowledged on disk waits for its own fsync.
 */
import assert from "node:assert/strict";
import { GroupCommit, type PendingAppend } from "./_group_commit.ts";
import type { MessageLog } from "./_message_log.ts";
import type { TopicState } from "./_catalog.ts";
import type { WriterLink } from "./_writer_link.ts";

/** A message log that writes nothing and counts its fsyncs (each held until released). */
function fakeLog() {
  let next = 0;
  const held: (() => void)[] = [];
  const log = {
    syncs: 0,
    append: (_d: Uint8Array, runs: { count: number }[]) =>
      Promise.resolve(runs.map((r) => (next += r.count) - r.count)),
    sync: () => {
      log.syncs++;
      return new Promise<void>((r) => held.push(r));
    },
    release: () => held.splice(0).forEach((r) => r()),
  };
  return log;
}

const STATE = { id: 1 } as unknown as TopicState;
const tick = () => new Promise((r) => setTimeout(r, 0));

function append(commit: GroupCommit, syncLater: boolean) {
  const out = { done: false };
  commit.enqueue({
    state: STATE,
    partition: 0,
    messages: [{ payload: new Uint8Array(1), headers: new Map() }],
    syncLater,
    resolve: () => out.done = true,
    reject: (e: unknown) => assert.fail(String(e)),
  } as unknown as PendingAppend);
  return out;
}

function commitOver(log: ReturnType<typeof fakeLog>, lazyMs: number) {
  return new GroupCommit(
    {} as WriterLink,
    log as unknown as MessageLog,
    100,
    () => 0,
    (e) => e,
    undefined,
    lazyMs,
  );
}

Deno.test("GroupCommit: QoS 0 transactions resolve when written; one fsync per interval covers them", async () => {
  const log = fakeLog();
  const commit = commitOver(log, 30);
  const a = append(commit, true);
  await tick();
  const b = append(commit, true);
  await tick();
  assert.deepEqual([a.done, b.done, log.syncs], [true, true, 0], "confirmed, not synced yet");
  await new Promise((r) => setTimeout(r, 60)); // real time: past the 30 ms sync interval
  assert.equal(log.syncs, 1, "one fsync for both, within the interval");
  log.release();
  await commit.drain();
});

Deno.test("GroupCommit: a transaction someone waits for syncs (covering earlier QoS 0 writes); no timer fsync after", async () => {
  const log = fakeLog();
  const commit = commitOver(log, 30);
  append(commit, true);
  await tick();
  const q1 = append(commit, false);
  await tick();
  assert.deepEqual([q1.done, log.syncs], [false, 1], "waits for its fsync");
  log.release();
  await tick();
  assert.equal(q1.done, true);
  await new Promise((r) => setTimeout(r, 60)); // real time: past the 30 ms sync interval
  assert.equal(log.syncs, 1, "the QoS 0 write was covered: no second fsync");
  await commit.drain();
});

Deno.test("GroupCommit with qos0_sync_ms 0: every transaction waits for its own fsync (as before)", async () => {
  const log = fakeLog();
  const commit = commitOver(log, 0);
  const a = append(commit, true);
  await tick();
  assert.deepEqual([a.done, log.syncs], [false, 1]);
  log.release();
  await tick();
  assert.equal(a.done, true);
  await commit.drain();
});

Deno.test("GroupCommit.drain() syncs deferred QoS 0 writes at once", async () => {
  const log = fakeLog();
  const commit = commitOver(log, 10_000);
  append(commit, true);
  await tick();
  const drained = commit.drain();
  assert.equal(log.syncs, 1, "not after 10 s: now");
  log.release();
  await drained;
});

/**
 * Group commit's deferred fsync (`embedded.qos0_sync_ms`): a transaction of QoS 0 appends only
 * is confirmed once written and synced by the next transaction someone waits for, or by the
 * interval's timer; one with anything acknowledged on disk waits for its own fsync. With a
 * commit linger (`embedded.commit_linger_ms`), small transactions someone waits for share one.
 */
import assert from "node:assert/strict";
import { GroupCommit, type PendingAppend } from "./_group_commit.ts";
import { LINGER_ENOUGH_MESSAGES } from "./_commit_syncs.ts";
import type { MessageLog } from "./_message_log.ts";
import type { TopicState } from "./_catalog.ts";
import type { WriterLink } from "./_writer_link.ts";

/**
 * A message log that writes nothing and counts its fsyncs (each held until released); each
 * transaction may take `room` bytes, and the size of each one written is kept.
 */
function fakeLog(room = Infinity) {
  let next = 0;
  const held: (() => void)[] = [];
  const log = {
    syncs: 0,
    written: [] as number[],
    roomFor: () => room,
    append: (d: Uint8Array, runs: { count: number }[]) => {
      log.written.push(d.length);
      return Promise.resolve(runs.map((r) => (next += r.count) - r.count));
    },
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

function append(commit: GroupCommit, syncLater: boolean, messages = 1) {
  const out = { done: false };
  commit.enqueue({
    state: STATE,
    partition: 0,
    messages: Array.from({ length: messages }, () => ({
      payload: new Uint8Array(1),
      headers: new Map(),
    })),
    syncLater,
    resolve: () => out.done = true,
    reject: (e: unknown) => assert.fail(String(e)),
  } as unknown as PendingAppend);
  return out;
}

function commitOver(
  log: ReturnType<typeof fakeLog>,
  lazyMs: number,
  lingerMs = 0,
  link: object = {},
) {
  return new GroupCommit(
    link as WriterLink,
    log as unknown as MessageLog,
    100,
    () => 0,
    (e) => e,
    undefined,
    lazyMs,
    lingerMs,
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

Deno.test("GroupCommit with a commit linger: small transactions in a row share one fsync, resolved only after it", async () => {
  const log = fakeLog();
  const commit = commitOver(log, 100, 40);
  const written: { done: boolean }[] = [];
  for (let i = 0; i < 3; i++) {
    written.push(append(commit, false));
    await tick(); // each its own transaction
  }
  assert.equal(log.syncs, 0, "lingering: no fsync yet");
  await new Promise((r) => setTimeout(r, 80)); // real time: past the 40 ms linger
  assert.equal(log.syncs, 1, "one fsync for the three");
  assert.deepEqual(written.map((w) => w.done), [false, false, false], "never before the fsync");
  log.release();
  await tick();
  assert.deepEqual(written.map((w) => w.done), [true, true, true]);
  await commit.drain();
});

Deno.test("GroupCommit with a commit linger: enough messages end it at once, covering the lingering ones", async () => {
  const log = fakeLog();
  const commit = commitOver(log, 100, 10_000);
  const small = append(commit, false);
  await tick();
  assert.equal(log.syncs, 0);
  const big = append(commit, false, LINGER_ENOUGH_MESSAGES);
  await tick();
  assert.equal(log.syncs, 1, "not after 10 s: now, one fsync for both");
  log.release();
  await tick();
  assert.deepEqual([small.done, big.done], [true, true]);
  const after = append(commit, false, LINGER_ENOUGH_MESSAGES);
  await tick();
  assert.equal(log.syncs, 2, "a big transaction alone does not linger");
  log.release();
  await tick();
  assert.equal(after.done, true);
  await commit.drain();
});

Deno.test("GroupCommit.drain() ends a commit linger at once", async () => {
  const log = fakeLog();
  const commit = commitOver(log, 100, 10_000);
  const a = append(commit, false);
  await tick();
  const drained = commit.drain();
  assert.equal(log.syncs, 1, "not after 10 s: now");
  log.release();
  await drained;
  assert.equal(a.done, true);
});

Deno.test("GroupCommit with a commit linger: a failed fsync rejects every lingering append, none resolves", async () => {
  let failSync: (e: Error) => void = () => {};
  const log = {
    append: (_d: Uint8Array, runs: { count: number }[]) => Promise.resolve(runs.map(() => 0)),
    sync: () => new Promise<void>((_, reject) => failSync = reject),
    roomFor: () => Infinity,
  };
  const commit = commitOver(log as unknown as ReturnType<typeof fakeLog>, 100, 10_000);
  const outcomes: string[] = [];
  for (let i = 0; i < 2; i++) {
    commit.enqueue({
      state: STATE,
      partition: 0,
      messages: [{ payload: new Uint8Array(1), headers: new Map() }],
      resolve: () => outcomes.push("resolved"),
      reject: () => outcomes.push("rejected"),
    } as unknown as PendingAppend);
    await tick();
  }
  const drained = commit.drain();
  failSync(new Error("EIO"));
  await drained;
  assert.deepEqual(outcomes, ["rejected", "rejected"]);
});

Deno.test("GroupCommit: a queue bigger than the log's room goes as several transactions, cut between appends, in order", async () => {
  const log = fakeLog(1000);
  const commit = commitOver(log, 0);
  const bases: number[] = [];
  const sizes = [400, 400, 400, 400, 2000, 400];
  const done = sizes.map((size, i) =>
    new Promise<void>((resolve, reject) =>
      commit.enqueue({
        state: STATE,
        partition: 0,
        messages: [{ payload: new Uint8Array(size), headers: new Map([["k", `${i}`]]) }],
        resolve: (base: number) => resolve(void (bases[i] = base)),
        reject,
      } as unknown as PendingAppend)
    )
  );
  while (log.written.length < 4) {
    await tick();
    log.release();
  }
  await Promise.all(done);
  // Two 400-byte messages per transaction; the 2000-byte one alone (the log decides whether
  // it fits anywhere); offsets as queued.
  assert.equal(log.written.length, 4);
  assert.ok(log.written[0] <= 1000 && log.written[1] <= 1000, String(log.written));
  assert.ok(log.written[2] > 2000 && log.written[3] <= 1000, String(log.written));
  assert.deepEqual(bases, [0, 1, 2, 3, 4, 5]);
  await commit.drain();
});

/** A catalog writer that records what it is asked to commit. */
function fakeLink() {
  const link = {
    offsets: [] as unknown[],
    transactions: 0,
    request: (call: { offsets: unknown[] }) => {
      link.transactions++;
      link.offsets.push(...call.offsets);
      return Promise.resolve();
    },
    syncCommitted: () => Promise.resolve(),
  };
  return link;
}

Deno.test("GroupCommit.storeOffset() commits a position only once the messages written before it are synced", async () => {
  const log = fakeLog();
  const link = fakeLink();
  const commit = commitOver(log, 0, 0, link);
  const delivered = append(commit, false);
  await tick(); // written and readable, its fsync held: a subscriber may have settled it
  let stored = false;
  const store = commit.storeOffset("keeper", STATE, 0, 0).then(() => stored = true);
  await tick();
  assert.deepEqual([link.offsets.length, stored, delivered.done], [0, false, false], "held");
  log.release();
  await store;
  assert.deepEqual(link.offsets, [["keeper", 1, 0, 0]], "committed after the log's fsync");
  // Nothing written since: the next position goes to the catalog without a log fsync.
  const syncs = log.syncs;
  await commit.storeOffset("keeper", STATE, 0, 0);
  assert.equal(log.syncs, syncs);
  await commit.drain();
});

Deno.test("GroupCommit.storeOffset() after QoS 0 writes whose fsync is deferred syncs them first", async () => {
  const log = fakeLog();
  const link = fakeLink();
  const commit = commitOver(log, 10_000, 0, link);
  append(commit, true);
  await tick(); // written, readable, its fsync 10 s away
  const store = commit.storeOffset("keeper", STATE, 0, 0);
  await tick();
  assert.deepEqual([log.syncs, link.offsets.length], [1, 0], "an fsync now, the offset after");
  log.release();
  await store;
  assert.equal(link.offsets.length, 1);
  const drained = commit.drain();
  log.release();
  await drained;
});

Deno.test("GroupCommit.storeOffset(): the positions stored in one run of JavaScript share one catalog transaction and one log fsync", async () => {
  const log = fakeLog();
  const link = fakeLink();
  const commit = commitOver(log, 10_000, 0, link);
  append(commit, true);
  await tick(); // written, readable, its fsync 10 s away
  // What the readers' commit timer does in one tick: a store per partition.
  const stores = [0, 1, 2].map((p) => commit.storeOffset("keeper", STATE, p, 7));
  await tick();
  log.release();
  await Promise.all(stores);
  assert.deepEqual([link.transactions, log.syncs], [1, 1], "one transaction, one fsync");
  assert.deepEqual(link.offsets, [0, 1, 2].map((p) => ["keeper", 1, p, 7]));
  // A store while one is in flight waits for it, then goes in the next transaction.
  const first = commit.storeOffset("keeper", STATE, 0, 8);
  await tick();
  const second = commit.storeOffset("keeper", STATE, 1, 8);
  const both = Promise.all([first, second]);
  for (let i = 0; i < 4; i++, await tick()) log.release();
  await both;
  assert.equal(link.transactions, 3);
  const drained = commit.drain();
  log.release();
  await drained;
});

/**
 * The 0.12 client's semantics against the fake Iggy (`tests/helpers/fake_iggy/`): dialect
 * auto-detection, pipelining with replies out of order, HistoryUnavailable, TransientNotAccepted,
 * a resend after a cut connection written once, and a long poll woken by an append. The bytes
 * themselves are checked against the official codec in `src/log/iggy/v12/vectors_test.ts`.
 */
import assert from "node:assert/strict";
import { IggyBackend } from "../../src/log/iggy/mod.ts";
import { BackendError } from "../../src/log/port.ts";
import { Logger } from "../../src/observe/logger.ts";
import {
  type FakeDialect,
  fakeIggyConfig,
  FakeNode,
  type FakeNodeOptions,
  FakeStore,
  type HookAction,
} from "../helpers/fake_iggy/mod.ts";
import type { FakeRequest } from "../helpers/fake_iggy/wire.ts";
import { waitFor } from "../helpers/gateway.ts";

const auth = { patUsername: "", cacheTtlMs: 0 };
const A = { stream: "s", topic: "t", partition: 0 };
const msg = (text: string) => ({ payload: new TextEncoder().encode(text), headers: new Map() });

async function withBackend(
  o: Partial<FakeNodeOptions> & { dialect: FakeDialect },
  fn: (b: IggyBackend, node: FakeNode, store: FakeStore) => Promise<void>,
  config = {},
): Promise<void> {
  const store = o.store ?? new FakeStore();
  const node = new FakeNode({ ...o, store });
  const b = new IggyBackend(fakeIggyConfig(config), auth, { dial: node.dial });
  try {
    await b.open();
    await fn(b, node, store);
  } finally {
    await b.close();
    await node.close();
  }
}

function registers(node: FakeNode): number[] {
  return node.seen.filter((r) => r.operation === 1).map((r) =>
    new DataView(r.body.buffer, r.body.byteOffset).getUint32(0, true)
  );
}

Deno.test("auto: a 0.11 server evicts the 0.12 Register with its window; the gateway registers as 0.11.0", async () => {
  await withBackend({ dialect: "0.11" }, async (b, node) => {
    assert.deepEqual(registers(node), [0x3002, 0x2c00]);
    assert.match(
      b.health().detail!,
      /Iggy server 0\.9\.0-fake, binary protocol 0\.11\.0 \(dialect 0\.11/,
    );
    await b.createTopic("s", "t", { partitions: 1 });
    assert.equal((await b.append({ ...A, messages: [msg("a")] })).baseOffset, 0);
  });
});

Deno.test("auto: a 0.12.2 server takes the first Register; the log detail names 0.12.2", async () => {
  await withBackend({ dialect: "0.12" }, (b, node) => {
    assert.deepEqual(registers(node), [0x3002]);
    assert.match(b.health().detail!, /0\.10\.0-fake, binary protocol 0\.12\.2 \(dialect 0\.12/);
    return Promise.resolve();
  });
});

Deno.test("auto: a 0.12.0-only server is refused, naming both windows (its layouts are not 0.12.2's)", async () => {
  const node = new FakeNode({ dialect: "0.12", version: 0x3000, store: new FakeStore() });
  const b = new IggyBackend(fakeIggyConfig(), auth, { dial: node.dial });
  await assert.rejects(b.open(), (e) =>
    e instanceof BackendError &&
    /accepts binary protocol 0\.12\.0; this gateway speaks 0\.11\.x .* and 0\.12\.2/.test(
      e.message,
    ));
  assert.deepEqual(registers(node), [0x3002], "no second Register with a layout we lack");
  await node.close();
});

Deno.test("a server window the gateway does not speak refuses the start, naming both windows", async () => {
  const node = new FakeNode({ dialect: "0.12", version: 0x4000, store: new FakeStore() });
  const b = new IggyBackend(fakeIggyConfig(), auth, { dial: node.dial });
  await assert.rejects(b.open(), (e) =>
    e instanceof BackendError &&
    /accepts binary protocol 0\.16\.0; this gateway speaks 0\.11\.x .* and 0\.12\.2/.test(
      e.message,
    ));
  await b.close();
  await node.close();
});

Deno.test("0.12: requests are pipelined on one connection and replies matched by id in any order", async () => {
  let holding = true;
  const hook = (r: FakeRequest): HookAction => (r.code === 120 && holding ? "hold" : undefined);
  await withBackend({ dialect: "0.12", hook }, async (b, node) => {
    await b.createTopic("s", "t", { partitions: 5 });
    for (let p = 0; p < 5; p++) await b.storeOffset("c", { ...A, partition: p }, 10 + p);
    const reads = [0, 1, 2, 3, 4].map((p) => b.getOffset("c", { ...A, partition: p }));
    await waitFor(() => node.heldCount >= 5, 5000, "the five offset reads held by the node");
    holding = false;
    node.releaseHeld(); // last request's reply first
    assert.deepEqual(await Promise.all(reads), [10, 11, 12, 13, 14]);
    assert.deepEqual(node.reusedIds, [], "every request took a fresh id");
  });
});

Deno.test("0.12: HistoryUnavailable re-routes and sends as new work to the new incarnation", async () => {
  await withBackend({ dialect: "0.12" }, async (b, node, store) => {
    await b.createTopic("s", "t", { partitions: 1 });
    await b.append({ ...A, messages: [msg("old")] });
    store.recreatePartition("s", "t", 0);
    const r = await b.append({ ...A, messages: [msg("new")] });
    assert.equal(r.baseOffset, 0);
    assert.deepEqual(store.payloads("s", "t", 0), ["new"]);
    const sends = node.seen.filter((x) => x.code === 101);
    const seqs = sends.map((x) => producerOf(x));
    assert.equal(seqs.length, 3); // old, refused with 87, new
    assert.notEqual(seqs[2].id, seqs[1].id, "new work runs under a fresh producer");
    assert.equal(seqs[2].seq, 0);
    assert.deepEqual(await b.poll(A, 0, 10).then((m) => m.length), 1);
  });
});

function producerOf(r: FakeRequest): { id: bigint; seq: number } {
  const v = new DataView(r.body.buffer, r.body.byteOffset, r.body.byteLength);
  const batch = 4 + v.getUint32(0, true);
  return { id: v.getBigUint64(batch + 56, true), seq: v.getUint32(batch + 68, true) };
}

Deno.test("0.12: TransientNotAccepted is retried with back-off as the identical frame", async () => {
  let refused = 0;
  const hook = (r: FakeRequest): HookAction =>
    r.code === 101 && refused++ < 2 ? { status: 58 } : undefined;
  await withBackend({ dialect: "0.12", hook }, async (b, node, store) => {
    await b.createTopic("s", "t", { partitions: 1 });
    assert.equal((await b.append({ ...A, messages: [msg("a")] })).baseOffset, 0);
    const sends = node.seen.filter((x) => x.code === 101);
    assert.equal(sends.length, 3);
    assert.ok(sends.every((s) => s.request === sends[0].request), "same request id");
    assert.deepEqual(store.payloads("s", "t", 0), ["a"]);
  });
});

Deno.test("0.12: a batch whose reply was lost to a cut connection is resent and written once", async () => {
  let cut = 0;
  const hook = (r: FakeRequest): HookAction =>
    r.code === 101 && cut++ === 1 ? "cut-after-apply" : undefined;
  await withBackend({ dialect: "0.12", hook }, async (b, node, store) => {
    await b.createTopic("s", "t", { partitions: 1 });
    await b.append({ ...A, messages: [msg("first")] });
    const r = await b.append({ ...A, messages: [msg("lost reply"), msg("second")] });
    assert.equal(r.baseOffset, 1);
    await b.append({ ...A, messages: [msg("third")] });
    assert.deepEqual(store.payloads("s", "t", 0), ["first", "lost reply", "second", "third"]);
    const sends = node.seen.filter((x) => x.code === 101).map(producerOf);
    assert.deepEqual(sends.map((s) => s.seq), [0, 1, 1, 3], "the resend kept its stamp");
    assert.equal(b.remote.resendCounters().resends, 1, "counted for /status.json and /metrics");
    assert.equal(registers(node).length, 1);
    assert.equal(
      node.seen.filter((x) => x.code === 15).length,
      1,
      "the resend went over a new connection, bound to the same session",
    );
  });
});

Deno.test("0.11: the same cut connection is resolved by a read-back: the append succeeds, written once", async () => {
  let cut = 0;
  const hook = (r: FakeRequest): HookAction =>
    r.code === 101 && cut++ === 1 ? "cut-after-apply" : undefined;
  await withBackend({ dialect: "0.11", hook }, async (b, _node, store) => {
    await b.createTopic("s", "t", { partitions: 1 });
    await b.append({ ...A, messages: [msg("first")] });
    const r = await b.append({ ...A, messages: [msg("lost reply"), msg("second")] });
    assert.equal(r.baseOffset, 1, "confirmed at the offset the read-back found it at");
    await b.append({ ...A, messages: [msg("third")] });
    assert.deepEqual(store.payloads("s", "t", 0), ["first", "lost reply", "second", "third"]);
    const counters = b.remote.resendCounters();
    assert.equal(counters.foundStored, 1, "counted for /status.json and /metrics");
    assert.equal(counters.resends, 0, "found: not sent again");
    assert.equal(counters.possibleDuplicates, 0);
  }, { protocol: "0.11" });
});

Deno.test("0.12: a caught-up poll waits in Iggy and an append wakes it", async () => {
  await withBackend({ dialect: "0.12" }, async (b, node, store) => {
    await b.createTopic("s", "t", { partitions: 1 });
    assert.deepEqual(await b.poll(A, 0, 10), []); // plain poll: empty, now caught up
    const waiting = b.poll(A, 0, 10);
    await waitFor(() => node.waitingPolls > 0, 5000, "the deferred poll waiting in the node");
    assert.equal(node.seen.filter((r) => r.code === 106).length, 1);
    store.appendExternal("s", "t", 0, new TextEncoder().encode("woken"));
    const got = await waiting;
    assert.deepEqual(got.map((m) => new TextDecoder().decode(m.payload)), ["woken"]);
  });
});

Deno.test("0.12: aborting a waiting poll cancels it in Iggy (108) and returns no messages", async () => {
  await withBackend({ dialect: "0.12" }, async (b, node) => {
    await b.createTopic("s", "t", { partitions: 1 });
    await b.poll(A, 0, 10);
    const ac = new AbortController();
    const waiting = b.poll(A, 0, 10, ac.signal);
    await waitFor(() => node.waitingPolls > 0, 5000, "the deferred poll waiting in the node");
    ac.abort();
    assert.deepEqual(await waiting, []);
    await waitFor(() => node.waitingPolls === 0, 5000, "the node to cancel the deferred poll");
    const cancel = node.seen.find((r) => r.code === 108)!;
    const deferred = node.seen.find((r) => r.code === 106)!;
    assert.equal(cancel.request, deferred.request, "108 names the deferred poll's request id");
  });
});

Deno.test("0.12: closing the backend cancels waiting polls", async () => {
  const store = new FakeStore();
  const node = new FakeNode({ dialect: "0.12", store });
  const b = new IggyBackend(fakeIggyConfig(), auth, { dial: node.dial });
  await b.open();
  await b.createTopic("s", "t", { partitions: 1 });
  await b.poll(A, 0, 10);
  const waiting = b.poll(A, 0, 10);
  await waitFor(() => node.waitingPolls > 0, 5000, "the deferred poll waiting in the node");
  await b.close();
  assert.deepEqual(await waiting, []);
  assert.ok(node.seen.some((r) => r.code === 108));
  await node.close();
});

Deno.test("0.12: further pool connections bind to the first one's session instead of logging in", async () => {
  await withBackend({ dialect: "0.12" }, async (b, node, store) => {
    const binds = () => node.seen.filter((r) => r.code === 15).length;
    await waitFor(() => binds() >= 1, 5000, "the second pool connection to bind");
    assert.equal(registers(node).length, 1, "one login for two connections");
    node.dropAll(); // both connections lost: they come back by binding, not logging in
    await waitFor(() => binds() >= 3, 5000, "both connections to come back by binding");
    assert.equal(registers(node).length, 1);
    await b.createTopic("s", "t", { partitions: 1 });
    await b.append({ ...A, messages: [msg("a")] });
    store.sessions.clear(); // the server forgot the session: binding fails, they log in again
    node.dropAll();
    await waitFor(
      () => registers(node).length >= 2,
      5000,
      "a fresh Register after the lost session",
    );
    await b.append({ ...A, messages: [msg("b")] });
    assert.deepEqual(store.payloads("s", "t", 0), ["a", "b"]);
    assert.deepEqual(node.reusedIds, [], "bound connections share one id counter");
  }, { pool_size: 2 });
});

Deno.test("0.12: LifecycleBusy after a lost reply keeps the producer stamp: the batch is written once", async () => {
  let sends = 0;
  const hook = (r: FakeRequest): HookAction => {
    if (r.code !== 101) return undefined;
    sends++;
    if (sends === 2) return "cut-after-apply"; // written, reply lost
    if (sends === 3) return { status: 88 }; // the resend meets a busy partition
    return undefined;
  };
  await withBackend({ dialect: "0.12", hook }, async (b, node, store) => {
    await b.createTopic("s", "t", { partitions: 1 });
    await b.append({ ...A, messages: [msg("first")] });
    assert.equal((await b.append({ ...A, messages: [msg("once")] })).baseOffset, 1);
    assert.deepEqual(store.payloads("s", "t", 0), ["first", "once"]);
    const stamps = node.seen.filter((x) => x.code === 101).map(producerOf);
    assert.equal(new Set(stamps.map((s) => s.id)).size, 1, "no renewal on 88");
    assert.deepEqual(stamps.map((s) => s.seq), [0, 1, 1, 1]);
  });
});

Deno.test("0.12: ProducerSequenceOutOfOrder renews the producer once: this and later batches are written", async () => {
  await withBackend({ dialect: "0.12" }, async (b, node, store) => {
    await b.createTopic("s", "t", { partitions: 1 });
    await b.append({ ...A, messages: [msg("a")] });
    // The partition's state of our producer no longer matches our sequence.
    for (const state of store.partition("s", "t", 0)!.producers.values()) state.next = 7;
    assert.equal((await b.append({ ...A, messages: [msg("b")] })).baseOffset, 1);
    assert.equal((await b.append({ ...A, messages: [msg("c")] })).baseOffset, 2);
    assert.deepEqual(store.payloads("s", "t", 0), ["a", "b", "c"]);
    const stamps = node.seen.filter((x) => x.code === 101).map(producerOf);
    assert.equal(stamps.length, 4, "a, b refused with 92, b renewed, c");
    assert.notEqual(stamps[2].id, stamps[1].id);
    assert.deepEqual(stamps.slice(2).map((s) => s.seq), [0, 1]);
  });
});

Deno.test("0.12: ProducerEpochFenced fails that append, renews the producer and warns", async () => {
  let fenced: bigint | undefined;
  const hook = (r: FakeRequest): HookAction => {
    if (r.code !== 101) return undefined;
    const { id, seq } = producerOf(r);
    if (seq === 1 && fenced === undefined) fenced = id; // a newer epoch of this id wrote
    return id === fenced ? { status: 93 } : undefined;
  };
  const warnings: string[] = [];
  const store = new FakeStore();
  const node = new FakeNode({ dialect: "0.12", store, hook });
  const logger = new Logger("warn", (line) => warnings.push(line));
  const b = new IggyBackend(fakeIggyConfig({}), auth, { dial: node.dial, logger });
  try {
    await b.open();
    await b.createTopic("s", "t", { partitions: 1 });
    await b.append({ ...A, messages: [msg("a")] });
    await assert.rejects(b.append({ ...A, messages: [msg("refused")] }), BackendError);
    assert.equal((await b.append({ ...A, messages: [msg("c")] })).baseOffset, 1);
    assert.deepEqual(store.payloads("s", "t", 0), ["a", "c"]);
    assert.equal(warnings.filter((w) => /fenced/.test(w)).length, 1);
  } finally {
    await b.close();
    await node.close();
  }
});

Deno.test("0.12: a send Iggy wrote but answered with an error renews the producer: the next batch is not taken for it", async () => {
  // Found by the hostile-Iggy fuzz round (tests/fuzz/hostile_iggy.ts): a reply whose status a
  // broken server (or a flipped bit) set to an error for a batch it wrote. The sequence stayed,
  // the next batch went under it, was taken for the written one's resend and acknowledged at
  // its offset without being written: a PUBACKed message lost.
  let sends = 0;
  const hook = (r: FakeRequest): HookAction =>
    r.code === 101 && ++sends === 2 ? { statusAfterApply: 3 } : undefined;
  await withBackend({ dialect: "0.12", hook }, async (b, node, store) => {
    await b.createTopic("s", "t", { partitions: 1 });
    await b.append({ ...A, messages: [msg("a")] });
    await assert.rejects(b.append({ ...A, messages: [msg("written, refused")] }), BackendError);
    assert.equal((await b.append({ ...A, messages: [msg("c")] })).baseOffset, 2);
    assert.deepEqual(store.payloads("s", "t", 0), ["a", "written, refused", "c"]);
    const stamps = node.seen.filter((x) => x.code === 101).map(producerOf);
    assert.notEqual(stamps[2].id, stamps[1].id, "renewed after the refusal");
    assert.equal(stamps[2].seq, 0);
  });
});

Deno.test("0.12: a send cut after Iggy wrote it, whose resends then never leave, renews the producer", async () => {
  // Found by the hostile-Iggy fuzz round: the first attempt was written (its reply lost), the
  // resends failed before leaving (no connection), and the NotSentError they ended with kept
  // the sequence: the next batch was acknowledged as the written one's resend, unwritten.
  let sends = 0;
  const hook = (r: FakeRequest, node: FakeNode): HookAction => {
    if (r.code !== 101 || ++sends !== 2) return undefined;
    node.down = true; // no connection for the resends
    return "cut-after-apply";
  };
  await withBackend({ dialect: "0.12", hook }, async (b, node, store) => {
    await b.createTopic("s", "t", { partitions: 1 });
    await b.append({ ...A, messages: [msg("a")] });
    await assert.rejects(b.append({ ...A, messages: [msg("written, cut")] }), BackendError);
    node.down = false;
    let receipt;
    for (let i = 0; i < 100 && receipt === undefined; i++) {
      receipt = await b.append({ ...A, messages: [msg("c")] }).catch(async () => {
        await new Promise((r) => setTimeout(r, 50)); // the pool reconnects
        return undefined;
      });
    }
    assert.equal(receipt?.baseOffset, 2);
    assert.deepEqual(store.payloads("s", "t", 0), ["a", "written, cut", "c"]);
  });
});

Deno.test("0.12: DeferredPollCapacityExceeded (90) polls that partition plainly; later messages arrive", async () => {
  const hook = (r: FakeRequest): HookAction => (r.code === 106 ? { status: 90 } : undefined);
  await withBackend({ dialect: "0.12", hook }, async (b, node, store) => {
    await b.createTopic("s", "t", { partitions: 1 });
    assert.deepEqual(await b.poll(A, 0, 10), []); // caught up
    assert.deepEqual(await b.poll(A, 0, 10), [], "refused deferred poll, then a plain one");
    assert.equal(node.seen.filter((r) => r.code === 106).length, 1);
    store.appendExternal("s", "t", 0, new TextEncoder().encode("late"));
    const got = await b.poll(A, 0, 10);
    assert.deepEqual(got.map((m) => new TextDecoder().decode(m.payload)), ["late"]);
  });
});

Deno.test("0.12: at most 64 deferred polls wait at once; further caught-up partitions poll plainly", async () => {
  await withBackend({ dialect: "0.12" }, async (b, node) => {
    const n = 70;
    await b.createTopic("s", "t", { partitions: n });
    const parts = Array.from({ length: n }, (_, partition) => ({ ...A, partition }));
    for (const p of parts) await b.poll(p, 0, 10); // every partition caught up
    const ac = new AbortController();
    const before = node.seen.length;
    const polls = () => node.seen.slice(before).filter((r) => r.code === 100 || r.code === 106);
    const waiting = parts.map((p) => b.poll(p, 0, 10, ac.signal));
    // Barrier: every one of the n polls reached the node, deferred or plain.
    await waitFor(() => polls().length >= n, 5000, `all ${n} polls at the node`);
    assert.equal(polls().length, n);
    assert.equal(node.waitingPolls, 64);
    assert.equal(node.seen.filter((r) => r.code === 106).length, 64);
    ac.abort();
    await Promise.all(waiting);
  });
});

Deno.test("0.12: a keyed and a balanced send to one partition at once are both written", async () => {
  await withBackend({ dialect: "0.12" }, async (b, _node, store) => {
    await b.createTopic("s", "t", { partitions: 1 });
    const keyed = b.append({ ...A, messages: [msg("keyed")] });
    const free = b.append({ ...A, balancedOver: 1, messages: [msg("u1"), msg("u2")] });
    await Promise.all([keyed, free]);
    assert.deepEqual(store.payloads("s", "t", 0).sort(), ["keyed", "u1", "u2"]);
    assert.equal((await b.append({ ...A, messages: [msg("next")] })).baseOffset, 3);
  });
});

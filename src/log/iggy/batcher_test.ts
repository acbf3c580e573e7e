import assert from "node:assert/strict";
import type { PartitionAddress } from "../port.ts";
import { AppendBatcher } from "./batcher.ts";

type Call = { address: PartitionAddress; messages: readonly string[] };

function recorder(base = 10) {
  const calls: Call[] = [];
  let next = base;
  let release: (() => void) | undefined;
  let gate: Promise<void> | undefined;
  return {
    calls,
    hold() {
      gate = new Promise((r) => (release = r));
    },
    open() {
      release?.();
      gate = undefined;
    },
    send: async (address: PartitionAddress, messages: readonly string[]) => {
      calls.push({ address, messages });
      const at = next;
      next += messages.length;
      if (gate) await gate;
      return at;
    },
  };
}

const A = { stream: "s", topic: "t", partition: 0 };

Deno.test("AppendBatcher coalesces same-tick appends into one send with per-append offsets", async () => {
  const r = recorder();
  const b = new AppendBatcher<string>(r.send, (m) => m.length, {
    maxMessages: 100,
    maxBytes: 1000,
    lingerMs: 0,
  });
  const receipts = await Promise.all([
    b.append({ ...A, messages: ["a", "b"] }),
    b.append({ ...A, messages: ["c"] }),
  ]);
  assert.equal(r.calls.length, 1);
  assert.deepEqual(r.calls[0].messages, ["a", "b", "c"]);
  assert.deepEqual(receipts.map((x) => x.baseOffset), [10, 12]);
});

Deno.test("AppendBatcher keeps one send in flight per partition and batches the waiting appends", async () => {
  const r = recorder();
  const b = new AppendBatcher<string>(r.send, (m) => m.length, {
    maxMessages: 100,
    maxBytes: 1000,
    lingerMs: 0,
  });
  r.hold();
  const first = b.append({ ...A, messages: ["a"] });
  await new Promise((res) => setTimeout(res, 0));
  const second = b.append({ ...A, messages: ["b"] });
  const third = b.append({ ...A, messages: ["c"] });
  await new Promise((res) => setTimeout(res, 0));
  assert.equal(r.calls.length, 1, "second and third wait for the first send");
  r.open();
  assert.deepEqual((await Promise.all([first, second, third])).map((x) => x.baseOffset), [
    10,
    11,
    12,
  ]);
  assert.deepEqual(r.calls.map((c) => c.messages), [["a"], ["b", "c"]]);
});

Deno.test("AppendBatcher splits at batch_max_messages but never splits one append", async () => {
  const r = recorder();
  const b = new AppendBatcher<string>(r.send, (m) => m.length, {
    maxMessages: 2,
    maxBytes: 1000,
    lingerMs: 0,
  });
  await Promise.all([
    b.append({ ...A, messages: ["a", "b", "c"] }),
    b.append({ ...A, messages: ["d"] }),
    b.append({ ...A, messages: ["e"] }),
  ]);
  assert.deepEqual(r.calls.map((c) => c.messages), [["a", "b", "c"], ["d", "e"]]);
});

Deno.test("AppendBatcher splits at batch_max_bytes", async () => {
  const r = recorder();
  const b = new AppendBatcher<string>(r.send, (m) => m.length, {
    maxMessages: 100,
    maxBytes: 5,
    lingerMs: 0,
  });
  await Promise.all(["aaa", "bbb", "c"].map((m) => b.append({ ...A, messages: [m] })));
  assert.deepEqual(r.calls.map((c) => c.messages), [["aaa"], ["bbb", "c"]]);
});

Deno.test("AppendBatcher keeps partitions apart", async () => {
  const r = recorder();
  const b = new AppendBatcher<string>(r.send, (m) => m.length, {
    maxMessages: 100,
    maxBytes: 1000,
    lingerMs: 0,
  });
  await Promise.all([
    b.append({ ...A, messages: ["a"] }),
    b.append({ ...A, partition: 1, messages: ["b"] }),
  ]);
  assert.equal(r.calls.length, 2);
});

Deno.test("AppendBatcher rejects every append of a failed send and sends the next ones", async () => {
  let n = 0;
  const b = new AppendBatcher<string>(
    (_a, m) => (n++ === 0 ? Promise.reject(new Error("boom")) : Promise.resolve(m.length)),
    (m) => m.length,
    { maxMessages: 1, maxBytes: 1000, lingerMs: 0 },
  );
  const [x, y] = await Promise.allSettled([
    b.append({ ...A, messages: ["a"] }),
    b.append({ ...A, messages: ["b"] }),
  ]);
  assert.equal(x.status, "rejected");
  assert.deepEqual(y, { status: "fulfilled", value: { baseOffset: 1 } });
});

Deno.test("AppendBatcher resolves with null offsets when the send confirms without offsets", async () => {
  const b = new AppendBatcher<string>(() => Promise.resolve(null), (m) => m.length, {
    maxMessages: 10,
    maxBytes: 1000,
    lingerMs: 0,
  });
  assert.deepEqual(await b.append({ ...A, messages: ["a"] }), { baseOffset: null });
});

Deno.test("AppendBatcher.flush() sends lingering appends at once", async () => {
  const r = recorder();
  const b = new AppendBatcher<string>(r.send, (m) => m.length, {
    maxMessages: 100,
    maxBytes: 1000,
    lingerMs: 60_000,
  });
  const p = b.append({ ...A, messages: ["a"] });
  assert.equal(r.calls.length, 0, "waits for the linger");
  await b.flush();
  assert.deepEqual(await p, { baseOffset: 10 });
});

Deno.test("AppendBatcher: unkeyed appends of a topic share one lane, each send to the next partition", async () => {
  const r = recorder();
  const b = new AppendBatcher<string>(r.send, (m) => m.length, {
    maxMessages: 100,
    maxBytes: 1000,
    lingerMs: 0,
  });
  r.hold();
  // The partition they name is a hint only: all three go to the balanced lane.
  const first = b.append({ ...A, partition: 2, balancedOver: 3, messages: ["a"] });
  await new Promise((res) => setTimeout(res, 0));
  const waiting = [
    b.append({ ...A, partition: 0, balancedOver: 3, messages: ["b"] }),
    b.append({ ...A, partition: 1, balancedOver: 3, messages: ["c", "d"] }),
  ];
  // A keyed append to another partition has its own lane and goes out at once.
  const other = (r.calls[0].address.partition + 1) % 3;
  const keyed = b.append({ ...A, partition: other, messages: ["k"] });
  await new Promise((res) => setTimeout(res, 0));
  assert.equal(r.calls.length, 2, "one balanced send in flight, plus the keyed one");
  r.open();
  const receipts = await Promise.all([first, ...waiting, keyed]);
  const balancedCalls = r.calls.filter((c) => c.messages[0] !== "k");
  assert.deepEqual(balancedCalls.map((c) => c.messages), [["a"], ["b", "c", "d"]]);
  const [p1, p2] = balancedCalls.map((c) => c.address.partition);
  assert.equal(p2, (p1 + 1) % 3, "the next send goes to the next partition");
  assert.deepEqual(receipts.slice(0, 3).map((x) => x.partition), [p1, p2, p2]);
  assert.equal(receipts[3].partition, undefined, "a keyed append's receipt names no partition");
  assert.equal(r.calls.find((c) => c.messages[0] === "k")!.address.partition, other);
});

Deno.test("AppendBatcher: a full batch waiting behind a balanced send starts another, to a partition with none in flight", async () => {
  const r = recorder();
  const b = new AppendBatcher<string>(r.send, (m) => m.length, {
    maxMessages: 2,
    maxBytes: 1000,
    lingerMs: 0,
    maxParallel: 2,
  });
  r.hold();
  const bal = (m: string[]) => b.append({ ...A, balancedOver: 3, messages: m });
  const first = bal(["a"]);
  await new Promise((res) => setTimeout(res, 0));
  assert.equal(r.calls.length, 1);
  const notFull = bal(["b"]);
  await new Promise((res) => setTimeout(res, 0));
  assert.equal(r.calls.length, 1, "a batch that is not full waits for the running send");
  const full = bal(["c"]); // 2 messages queued = maxMessages: full
  const more = [bal(["d", "e"]), bal(["f", "g"])];
  await new Promise((res) => setTimeout(res, 0));
  assert.equal(r.calls.length, 2, "one more send, no more than maxParallel");
  const inFlight = r.calls.map((c) => c.address.partition);
  assert.notEqual(inFlight[0], inFlight[1], "never two sends in flight to one partition");
  r.open();
  await Promise.all([first, notFull, full, ...more]);
  assert.deepEqual(r.calls.flatMap((c) => c.messages), ["a", "b", "c", "d", "e", "f", "g"]);
});

Deno.test("AppendBatcher: a keyed send waits while an unkeyed send to its partition is in flight, and the reverse", async () => {
  const inFlight = new Map<number, number>();
  let overlap = false;
  const gates: (() => void)[] = [];
  const sent: { partition: number; messages: readonly string[] }[] = [];
  const send = async (a: PartitionAddress, messages: readonly string[]) => {
    const n = (inFlight.get(a.partition) ?? 0) + 1;
    inFlight.set(a.partition, n);
    if (n > 1) overlap = true;
    sent.push({ partition: a.partition, messages });
    await new Promise<void>((r) => gates.push(r));
    inFlight.set(a.partition, n - 1);
    return 0;
  };
  const b = new AppendBatcher<string>(send, (m) => m.length, {
    maxMessages: 100,
    maxBytes: 1000,
    lingerMs: 0,
  });
  // One partition: the balanced send and the keyed send both target partition 0.
  const unkeyed = b.append({ ...A, balancedOver: 1, messages: ["u"] });
  await new Promise((res) => setTimeout(res, 0));
  const keyed = b.append({ ...A, partition: 0, messages: ["k"] });
  await new Promise((res) => setTimeout(res, 0));
  assert.equal(sent.length, 1, "the keyed send waits for the unkeyed one");
  gates.shift()!();
  await unkeyed;
  await new Promise((res) => setTimeout(res, 0));
  assert.equal(sent.length, 2);
  const again = b.append({ ...A, balancedOver: 1, messages: ["u2"] });
  await new Promise((res) => setTimeout(res, 0));
  assert.equal(sent.length, 2, "and an unkeyed one waits for the keyed one");
  gates.shift()!();
  await keyed;
  await new Promise((res) => setTimeout(res, 0));
  gates.shift()!();
  await again;
  assert.equal(overlap, false);
  assert.deepEqual(sent.map((s) => s.messages[0]), ["u", "k", "u2"]);
});

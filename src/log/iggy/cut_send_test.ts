import assert from "node:assert/strict";
import { loadHashes } from "../../base/xxhash.ts";
import { decodeBatches, type PolledMessage, type PollReply } from "./batch.ts";
import { ByteReader, DecodeError } from "./bytes.ts";
import { IggyConnectionError, IggyTimeoutError } from "./codes.ts";
import { CutSends, firstMessageId, READBACK } from "./cut_send.ts";
import { HEADER_SIZE } from "./header_layout.ts";
import type { PartitionOps } from "./partition_ops.ts";
import { SendEncoder } from "./send_encoder.ts";

await loadHashes();

const A = { stream: "s", topic: "t", partition: 1 };
const CUT = new IggyConnectionError("cut (test)");
const message = (text: string) => ({ payload: new TextEncoder().encode(text), headers: new Map() });

/** A frame of `n` messages, and the ids its messages got. */
function frameOf(n: number): { frame: Uint8Array; ids: bigint[] } {
  const frame = new SendEncoder().encode(
    "s",
    "t",
    1,
    Array.from({ length: n }, (_, i) => message(`m${i}`)),
    1,
  );
  const dv = new DataView(frame.buffer, frame.byteOffset);
  const batch = HEADER_SIZE + 4 + dv.getUint32(HEADER_SIZE, true);
  const ids = decodeBatches(new ByteReader(frame.subarray(batch))).map((m) => m.id);
  return { frame, ids };
}

/** A partition holding `ids` from offset 0, as polls and sends see it. */
function partition(ids: bigint[]) {
  const sent: Uint8Array[] = [];
  const polls: [number, number][] = [];
  const ops = {
    poll(_c: string, _a: unknown, from: number, count: number): Promise<PollReply> {
      polls.push([from, count]);
      const messages = ids.slice(from, from + count).map((id, i) => ({ id, offset: from + i }));
      return Promise.resolve({
        partitionId: 1,
        currentOffset: ids.length - 1,
        messages: messages as unknown as PolledMessage[],
      });
    },
    send(_a: unknown, frame: Uint8Array): Promise<Uint8Array> {
      sent.push(frame);
      return Promise.resolve(new Uint8Array(0));
    },
  } as unknown as PartitionOps;
  const cuts = new CutSends({
    ops: () => ops,
    consumer: "c",
    nextOffset: () => Promise.resolve(ids.length),
  });
  return { cuts, sent, polls, ops };
}

Deno.test("firstMessageId() reads the id the encoder gave a frame's first message", () => {
  const { frame, ids } = frameOf(3);
  assert.equal(firstMessageId(frame), ids[0]);
});

Deno.test("a cut send found stored is confirmed at its offset, not sent again", async () => {
  const { frame, ids } = frameOf(5);
  const others = Array.from({ length: 7_000 }, (_, i) => BigInt(i + 1));
  const { cuts, sent, polls, ops } = partition([...others, ...ids, ...others.slice(0, 3_000)]);
  assert.equal(await cuts.resolve(A, frame, 5, CUT, ops), 7_000);
  assert.deepEqual(sent, []);
  assert.deepEqual(cuts.counts, { found: 1, resent: 0, failed: 0 });
  assert.ok(polls.every(([, n]) => n <= READBACK.perPoll), "polls are bounded");
});

Deno.test("a cut send not found is sent again once, the same frame; one beyond the read-back window too", async () => {
  const { frame } = frameOf(2);
  const { cuts, sent, ops } = partition(Array.from({ length: 100 }, (_, i) => BigInt(i + 1)));
  assert.equal(await cuts.resolve(A, frame, 2, CUT, ops), null);
  assert.deepEqual(sent, [frame]);
  // Stored, but more than the slack of other messages came after it: resent (counted).
  const far = frameOf(1);
  const after = Array.from({ length: READBACK.slack + 10 }, (_, i) => BigInt(i + 1));
  const p = partition([far.ids[0], ...after]);
  await p.cuts.resolve(A, far.frame, 1, CUT, p.ops);
  assert.deepEqual(p.cuts.counts, { found: 0, resent: 1, failed: 0 });
});

Deno.test("a send that timed out is not read back: the timeout is thrown, counted as a possible duplicate", async () => {
  const { frame } = frameOf(1);
  const { cuts, sent, polls, ops } = partition([]);
  const timeout = new IggyTimeoutError("no answer (test)");
  await assert.rejects(cuts.resolve(A, frame, 1, timeout, ops), (e) => e === timeout);
  assert.deepEqual([sent, polls], [[], []]);
  assert.deepEqual(cuts.counts, { found: 0, resent: 0, failed: 1 });
});

Deno.test("a cut send is not read back in another dialect than the one that sent it", async () => {
  const { frame } = frameOf(1);
  const { cuts, sent, polls } = partition([]);
  await assert.rejects(cuts.resolve(A, frame, 1, CUT, {}), (e) => e === CUT);
  assert.deepEqual([sent, polls], [[], []]);
  assert.deepEqual(cuts.counts, { found: 0, resent: 0, failed: 1 });
});

Deno.test("a read-back answered with messages before the offset asked fails the send instead of asking forever", async () => {
  // A broken or hostile server that answers every poll with the message at offset 0: the
  // read-back moved its position back to 1 each time and never ended (nor did the publish).
  const { frame } = frameOf(1);
  const { cuts, sent, ops } = partition(Array.from({ length: 50 }, (_, i) => BigInt(i + 1)));
  let polls = 0;
  ops.poll = () => {
    polls++;
    const stale = [{ id: 99n, offset: 0 }] as unknown as PolledMessage[];
    return Promise.resolve({ partitionId: 1, currentOffset: 49, messages: stale });
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const hang = new Promise((r) => timer = setTimeout(() => r("hang"), 2000));
  const outcome = await Promise.race([cuts.resolve(A, frame, 1, CUT, ops).catch((e) => e), hang]);
  clearTimeout(timer);
  assert.ok(outcome instanceof DecodeError, String(outcome));
  assert.match(outcome.message, /poll from offset 1 with messages up to offset 0/);
  assert.ok(polls <= 2, `${polls} polls`);
  assert.deepEqual(sent, []);
  assert.deepEqual(cuts.counts, { found: 0, resent: 0, failed: 1 });
});

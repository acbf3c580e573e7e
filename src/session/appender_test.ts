import assert from "node:assert/strict";
import { appendAndOffer, type AppendContext, Appender, type OfferContext } from "./appender.ts";
import { AppendBudget } from "./append_budget.ts";
import type { V5Session } from "./v5_session.ts";
import type { PublishPacket } from "../codec/packets.ts";
import {
  type AppendReceipt,
  type AppendRequest,
  BackendError,
  type OutgoingMessage,
  type PartitionAddress,
} from "../log/port.ts";

const A: PartitionAddress = { stream: "s", topic: "t", partition: 0 };
const message: OutgoingMessage = { payload: new Uint8Array([1]), headers: new Map() };

/** A context whose backend answers `answer` and whose delivery and topic cache record calls. */
function context(
  answer: (r: AppendRequest) => Promise<AppendReceipt>,
  o: { releasesMessages?: boolean; wants?: boolean } = {},
) {
  const offers: [PartitionAddress, number | null, number][] = [];
  const invalidated: string[] = [];
  const ctx = {
    backend: { append: answer, remote: { releasesMessages: o.releasesMessages } },
    delivery: {
      notifyAppended: (at: PartitionAddress, base: number | null, m: OutgoingMessage[]) =>
        offers.push([at, base, m.length]),
      wantsAppended: () => o.wants ?? true,
    },
    preparer: { topics: { invalidate: (s: string, t: string) => invalidated.push(`${s}/${t}`) } },
  } as unknown as OfferContext;
  return { ctx, offers, invalidated };
}

Deno.test("appendAndOffer(): offered once at the commit, not again at the receipt", async () => {
  const { ctx, offers } = context((r) => {
    r.onCommitted?.(7);
    return Promise.resolve({ baseOffset: 7 });
  });
  await appendAndOffer(ctx, { address: A, messages: [message] });
  assert.deepEqual(offers, [[A, 7, 1]]);
});

Deno.test("appendAndOffer(): a backend without onCommitted offers at its receipt, where it placed them", async () => {
  const { ctx, offers } = context(() => Promise.resolve({ baseOffset: 3, partition: 2 }));
  await appendAndOffer(ctx, { address: { ...A, balancedOver: 3 }, messages: [message] });
  assert.deepEqual(offers, [[{ ...A, partition: 2 }, 3, 1]]);
});

Deno.test("appendAndOffer(): messages nobody wants are let go once the backend has them", async () => {
  const { ctx, offers } = context(() => Promise.resolve({ baseOffset: null }), {
    releasesMessages: true,
    wants: false,
  });
  const a = { address: A, messages: [message] };
  await appendAndOffer(ctx, a);
  assert.deepEqual(a.messages, []);
  assert.deepEqual(offers, [[A, null, 0]], "an empty offer: the reader polls");
});

Deno.test("appendAndOffer(): a target the backend no longer has leaves the topic cache", async () => {
  const gone = new BackendError("not_found", "no such topic");
  const { ctx, offers, invalidated } = context(() => Promise.reject(gone));
  await assert.rejects(appendAndOffer(ctx, { address: A, messages: [message] }), (e) => e === gone);
  assert.deepEqual(invalidated, ["s/t"]);
  assert.deepEqual(offers, []);
  const other = context(() => Promise.reject(new BackendError("timeout", "slow")));
  await assert.rejects(appendAndOffer(other.ctx, { address: A, messages: [message] }));
  assert.deepEqual(other.invalidated, [], "only not_found");
});

/** An appender over `answer`, recording what its outbox got and what was offered. */
function appender(answer: (r: AppendRequest) => Promise<AppendReceipt>, v5: object | null) {
  const { ctx, offers } = context(answer);
  const written: Uint8Array[] = [];
  let closed = 0;
  const count = { inc: () => {}, observe: () => {} };
  const full = {
    ...ctx,
    metrics: {
      appendBatch: count,
      pubackLatency: count,
      outcome: { acked: count, appended: count, failed: count },
    },
    logger: { limited: () => {} },
    clock: { now: () => 0 },
    appendBudget: new AppendBudget(100),
    config: { limits: { max_append_batch: 100 } },
  } as unknown as AppendContext;
  const site = {
    outbox: {
      push: (b: Uint8Array) => written.push(b),
      pushAck: (id: number, type = 0x40) =>
        written.push(new Uint8Array([type, 2, id >> 8, id & 0xff])),
    },
    unacknowledged: () => closed++,
    spanContext: null,
    session: null,
    v5: v5 as V5Session | null,
  };
  return { a: new Appender(full, site), written, offers, closed: () => closed };
}

function publish(packetId: number, qos: 0 | 1 | 2 = 1): PublishPacket {
  return {
    type: "publish",
    topic: "t",
    payload: new Uint8Array([1]),
    qos,
    retain: false,
    dup: false,
    packetId,
  };
}

Deno.test("Appender: where the backend placed a batch is read once from its receipt, for the offer and the PUBACK's coordinates alike", async () => {
  const v5 = { pubackCoordinates: true, maximumPacketSize: 1 << 20, problemInformation: false };
  const { a, written, offers } = appender(
    () => Promise.resolve({ baseOffset: 40, partition: 2 }),
    v5,
  );
  const balanced = { ...A, balancedOver: 3 };
  a.add(publish(5), { kind: "append", address: balanced, message, rule: null });
  a.add(publish(6), { kind: "append", address: balanced, message, rule: null });
  a.flush();
  await a.idle();
  assert.deepEqual(offers, [[{ ...A, partition: 2 }, 40, 2]]);
  const text = written.map((b) => new TextDecoder().decode(b));
  assert.equal(written.length, 2);
  for (const [i, t] of text.entries()) {
    assert.equal(written[i][0], 0x40);
    assert.match(t, /iggy\.partition.*2/s);
    assert.match(t, new RegExp(`iggy\\.offset.*${40 + i}`, "s"));
  }
});

Deno.test("Appender: PUBACKs go into the outbox in arrival order across partitions; a refused 3.1.1 publish closes after those before it", async () => {
  const later = Promise.withResolvers<AppendReceipt>();
  const { a, written, offers, closed } = appender(
    (r) => r.partition === 0 ? later.promise : Promise.resolve({ baseOffset: 0 }),
    null,
  );
  a.add(publish(1), { kind: "append", address: A, message, rule: null });
  a.add(publish(2), { kind: "append", address: { ...A, partition: 1 }, message, rule: null });
  a.notAppended(publish(3), null);
  a.flush();
  // Every microtask runs before a timer: 2's receipt has been handled by then.
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(offers.length, 1, "2 is confirmed");
  assert.deepEqual(written, [], "its PUBACK waits for 1's");
  later.resolve({ baseOffset: 0 });
  await a.idle();
  assert.deepEqual(written.map((b) => b[3]), [1, 2]);
  assert.equal(closed(), 1);
});

Deno.test("Appender: one append per partition a read touched, in the order they first came, each with its messages in order", async () => {
  const asked: [number, number[]][] = [];
  const { a, written } = appender((r) => {
    asked.push([r.partition, r.messages.map((m) => m.payload[0])]);
    return Promise.resolve({ baseOffset: 0 });
  }, null);
  const at = (partition: number) => ({ ...A, partition });
  const [p0, p1, p2] = [at(0), at(1), at(2)]; // one address object per partition, as the preparer
  const send = (id: number, address: PartitionAddress) =>
    a.add(publish(id), {
      kind: "append",
      address,
      message: { payload: new Uint8Array([id]), headers: new Map() },
      rule: null,
    });
  send(1, p1);
  send(2, p0);
  send(3, p1);
  send(4, p2);
  send(5, p0);
  a.flush();
  send(6, p0); // the next read: a batch of its own
  a.flush();
  a.flush(); // nothing more to append
  await a.idle();
  assert.deepEqual(asked, [[1, [1, 3]], [0, [2, 5]], [2, [4]], [0, [6]]]);
  assert.deepEqual(written.map((b) => b[3]), [1, 2, 3, 4, 5, 6]);
});

import assert from "node:assert/strict";
import { appendAndOffer, type OfferContext } from "./appender.ts";
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

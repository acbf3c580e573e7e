import assert from "node:assert/strict";
import { IggyError, IggyEvictionError } from "./codes.ts";
import { evictionFrame, replyFrame, resultOk } from "../../../tests/helpers/fake_iggy/frames.ts";
import { HEADER_SIZE } from "./header_layout.ts";
import { decodeReply } from "./reply.ts";

function split(frame: Uint8Array): [Uint8Array, Uint8Array] {
  return [frame.subarray(0, HEADER_SIZE), frame.subarray(HEADER_SIZE)];
}

Deno.test("decodeReply() returns a raw body for a NonReplicated read", () => {
  const body = new Uint8Array([1, 2, 3]);
  const [h, b] = split(replyFrame({ operation: 2, body }));
  assert.deepEqual(decodeReply(h, b, 300), body);
});

Deno.test("decodeReply() returns the raw body of SendMessages (not result-framed)", () => {
  const body = new Uint8Array([0, 0, 0, 0]);
  const [h, b] = split(replyFrame({ operation: 160, body }));
  assert.deepEqual(decodeReply(h, b, 101), body);
});

Deno.test("decodeReply() strips an empty result section from a metadata reply", () => {
  const payload = new Uint8Array([9, 8, 7]);
  const [h, b] = split(replyFrame({ operation: 128, body: resultOk(payload) }));
  assert.deepEqual(decodeReply(h, b, 202), payload);
});

Deno.test("decodeReply() strips the result section of StoreConsumerOffset (161)", () => {
  const [h, b] = split(replyFrame({ operation: 161, body: resultOk() }));
  assert.equal(decodeReply(h, b, 121).length, 0);
});

Deno.test("decodeReply() throws the first result entry's code for a failed metadata op", () => {
  const body = new Uint8Array(12);
  const v = new DataView(body.buffer);
  v.setUint32(0, 1, true);
  v.setUint32(4, 0, true);
  v.setUint32(8, 1012, true);
  const [h, b] = split(replyFrame({ operation: 128, body }));
  assert.throws(() => decodeReply(h, b, 202), (e) => e instanceof IggyError && e.code === 1012);
});

Deno.test("decodeReply() throws the reply status before looking at the body", () => {
  const [h, b] = split(replyFrame({ operation: 160, status: 41 }));
  assert.throws(() => decodeReply(h, b, 101), (e) => e instanceof IggyError && e.code === 41);
});

Deno.test("decodeReply() treats a Register reply as result-framed only when it has a body", () => {
  const [h, b] = split(replyFrame({ operation: 1 }));
  assert.equal(decodeReply(h, b, 40).length, 0);
  const [h2, b2] = split(replyFrame({ operation: 1, body: resultOk(new Uint8Array([5])) }));
  assert.deepEqual(decodeReply(h2, b2, 40), new Uint8Array([5]));
});

Deno.test("decodeReply() turns an eviction into IggyEvictionError", () => {
  const [h, b] = split(evictionFrame(9));
  assert.throws(
    () => decodeReply(h, b, 40),
    (e) => e instanceof IggyEvictionError && e.code === 42 && /invalid credentials/.test(e.message),
  );
});

Deno.test("decodeReply() rejects a truncated result section", () => {
  const [h, b] = split(replyFrame({ operation: 132, body: new Uint8Array([1, 0, 0, 0]) }));
  assert.throws(() => decodeReply(h, b, 302), /truncated/);
});

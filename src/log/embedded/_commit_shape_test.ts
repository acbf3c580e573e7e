import assert from "node:assert/strict";
import { appendBytesBound, appendsThatFit } from "./_commit_shape.ts";
import { LOG_RECORD_HEADER_BYTES } from "./_log_record.ts";
import { RECORD_HEADER_BYTES } from "./_batch.ts";

/** An append of one message of `bytes` payload bytes and no headers. */
const sized = (bytes: number) => ({
  messages: [{ payload: new Uint8Array(bytes), headers: new Map<string, string>() }],
});
const FRAMING = LOG_RECORD_HEADER_BYTES + RECORD_HEADER_BYTES;

Deno.test("appendBytesBound: records, headers at their largest, and a log record header", () => {
  assert.equal(appendBytesBound(sized(1000)), 1000 + FRAMING);
  const withHeader = {
    messages: [{ payload: new Uint8Array(10), headers: new Map([["k", "v"]]) }],
  };
  assert.ok(appendBytesBound(withHeader) >= 10 + FRAMING + 2);
});

Deno.test("appendsThatFit: a prefix within the room; the first alone when nothing fits with it", () => {
  const room = () => 3 * (1000 + FRAMING);
  assert.equal(appendsThatFit([sized(1000), sized(1000), sized(1000), sized(1000)], room), 3);
  assert.equal(appendsThatFit([sized(1000), sized(1000)], room), 2);
  assert.equal(appendsThatFit([sized(5000), sized(10)], () => 100_000), 2);
  // The active segment's room for an append that fits there, a new segment's for one that
  // does not: the first decides, and the cut stays within its room.
  const roomFor = (first: number) => (first <= 2000 ? 2000 : 50_000);
  assert.equal(appendsThatFit([sized(1000), sized(1000), sized(100)], roomFor), 1);
  assert.equal(appendsThatFit([sized(4000), sized(4000), sized(100)], roomFor), 3);
});

Deno.test("appendsThatFit: appends that find no room at all go together (refused as one), up to one that fits", () => {
  const full = (first: number) => (first <= 500 ? 500 : 0);
  assert.equal(appendsThatFit([sized(1000), sized(1000), sized(100), sized(1000)], full), 2);
  assert.equal(appendsThatFit([sized(1000), sized(1000)], full), 2);
});

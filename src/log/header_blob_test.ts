import assert from "node:assert/strict";
import { decodeHeaders, encodeHeaders, headersMaxBytes, writeHeaders } from "./header_blob.ts";

Deno.test("encodeHeaders() round-trips UTF-8 strings exactly, in insertion order", () => {
  const headers = new Map([
    ["z", "last key first"],
    ["mqtt.topic", "héllo/wörld/€/😀/\u0000/\uffff"],
    ["a", ""],
    ["emoji 😀", "日本語"],
  ]);
  const decoded = decodeHeaders(encodeHeaders(headers));
  assert.deepEqual([...decoded], [...headers]);
});

Deno.test("encodeHeaders() handles strings whose length needs a multi-byte varint", () => {
  const long = "x".repeat(200); // > 127 bytes, ASCII but beyond the short fast path
  const longer = "ü".repeat(70_000); // 140,000 UTF-8 bytes: a 3-byte varint, buffer growth
  const headers = new Map([[long, longer], ["k", long]]);
  assert.deepEqual([...decodeHeaders(encodeHeaders(headers))], [...headers]);
});

Deno.test("encodeHeaders() of an empty map is an empty blob", () => {
  const bytes = encodeHeaders(new Map());
  assert.equal(bytes.length, 0);
  assert.equal(decodeHeaders(bytes).size, 0);
});

Deno.test("writeHeaders() stays within headersMaxBytes() for ASCII, multi-byte and long strings", () => {
  const cases = [
    new Map([["mqtt.topic", "a/b"], ["mqtt.qos", "1"]]),
    new Map([["k", "ü€😀".repeat(50)]]),
    new Map([["long", "x".repeat(300)]]),
  ];
  for (const headers of cases) {
    const max = headersMaxBytes(headers);
    const buf = new Uint8Array(max + 8).fill(0xee);
    const end = writeHeaders(buf, 4, headers);
    assert.ok(end - 4 <= max);
    assert.equal(buf[end], 0xee, "nothing written past the end it returned");
    assert.deepEqual([...decodeHeaders(buf.subarray(4, end))], [...headers]);
  }
});

Deno.test("decodeHeaders() throws on a truncated blob", () => {
  const bytes = encodeHeaders(new Map([["key", "value"]]));
  assert.throws(() => decodeHeaders(bytes.subarray(0, bytes.length - 1)), RangeError);
});

Deno.test("envelope keys are stored as two-byte codes; spelled-out keys (older blobs) read the same", () => {
  const headers = new Map([
    ["mqtt.topic", "a/b"],
    ["mqtt.qos", "1"],
    ["mqtt.client_id", "c"],
    ["mqtt.packet_id", "7"],
    ["custom", "x"],
    ["", "empty key"],
  ]);
  const coded = encodeHeaders(headers);
  assert.deepEqual([...decodeHeaders(coded)], [...headers]);
  // 4 codes × 2 bytes instead of 46 key bytes + 4 lengths.
  assert.deepEqual([...coded.subarray(0, 2)], [0, 1]);
  // An older blob spells every key out.
  const text = new TextEncoder();
  const spelled: number[] = [];
  for (const [k, v] of [["mqtt.topic", "a/b"], ["mqtt.qos", "1"]]) {
    for (const s of [k, v]) spelled.push(s.length, ...text.encode(s));
  }
  assert.deepEqual(
    [...decodeHeaders(new Uint8Array(spelled))],
    [["mqtt.topic", "a/b"], ["mqtt.qos", "1"]],
  );
  assert.throws(() => decodeHeaders(new Uint8Array([0, 200, 1, 0x61])), RangeError);
});

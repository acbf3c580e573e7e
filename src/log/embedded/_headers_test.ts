import assert from "node:assert/strict";
import { decodeHeaders, encodeHeaders, HeaderEncoder } from "./_headers.ts";

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

Deno.test("HeaderEncoder views stay valid until reset(), across buffer growth", () => {
  const encoder = new HeaderEncoder();
  const views = Array.from(
    { length: 500 },
    (_, i) => encoder.encode(new Map([["i", `${i}`], ["pad", "p".repeat(100)]])),
  );
  views.forEach((v, i) => assert.equal(decodeHeaders(v).get("i"), `${i}`));
});

Deno.test("decodeHeaders() throws on a truncated blob", () => {
  const bytes = encodeHeaders(new Map([["key", "value"]]));
  assert.throws(() => decodeHeaders(bytes.subarray(0, bytes.length - 1)), RangeError);
});

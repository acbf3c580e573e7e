import assert from "node:assert/strict";
import { utf8 as toUtf8 } from "./utf8.ts";
import { loadHashes, xxh32, xxh3_64 } from "./xxhash.ts";

await loadHashes();

Deno.test("xxh32() matches the messages-key vectors of IGGY.md §5", () => {
  assert.equal(xxh32(toUtf8("")), 0x02cc5d05);
  assert.equal(xxh32(toUtf8("abc")), 0x32d153ff);
  assert.equal(xxh32(toUtf8("sensor-1")), 0x7da9ad4a);
  assert.equal(xxh32(toUtf8("sensor-1")) % 3, 1);
  assert.equal(xxh32(toUtf8("devices/abc/telemetry")), 0xb080ee2a);
  assert.equal(xxh32(toUtf8("key")), 0xb3d93ae0);
});

Deno.test("xxh3_64() hashes the concatenation of its parts", () => {
  const whole = xxh3_64(toUtf8("first-second"));
  assert.equal(xxh3_64(toUtf8("first-"), toUtf8("second")), whole);
  assert.notEqual(xxh3_64(toUtf8("first")), whole);
});

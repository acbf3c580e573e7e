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

Deno.test("xxh32() agrees with hash-wasm's XXH32 on every length from 0 to 300 bytes", async () => {
  // hash-wasm (a dependency already, for XXH3) as the oracle: every stripe/tail combination.
  const { createXXHash32 } = await import("hash-wasm");
  const oracle = await createXXHash32(0);
  const bytes = new Uint8Array(300);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 131 + 7) & 0xff;
  for (let n = 0; n <= bytes.length; n++) {
    const b = bytes.subarray(0, n);
    oracle.init();
    oracle.update(b);
    assert.equal(xxh32(b), parseInt(oracle.digest("hex"), 16), `length ${n}`);
  }
});

Deno.test("xxh32() hashes a string as its UTF-8 bytes, however long", () => {
  for (const s of ["é", "sensor/ü/€/😀", "k".repeat(1000), "\ud800 lone"]) {
    assert.equal(xxh32(s), xxh32(toUtf8(s)), s.slice(0, 20));
  }
});

Deno.test("xxh3_64() hashes the concatenation of its parts", () => {
  const whole = xxh3_64(toUtf8("first-second"));
  assert.equal(xxh3_64(toUtf8("first-"), toUtf8("second")), whole);
  assert.notEqual(xxh3_64(toUtf8("first")), whole);
});

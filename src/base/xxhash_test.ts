import assert from "node:assert/strict";
import { utf8 as toUtf8 } from "./utf8.ts";
import { loadHashes, sealBatchXxh3, xxh32, xxh3_64 } from "./xxhash.ts";

await loadHashes();

Deno.test("xxh32() matches the messages-key check values of libxxhash", () => {
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

Deno.test("xxh3_64() and xxh32() agree with hash-wasm on inputs of every length to 600", async () => {
  const { createXXHash3, createXXHash32 } = await import("hash-wasm");
  const [h3, h32] = await Promise.all([createXXHash3(0, 0), createXXHash32(0)]);
  const data = new Uint8Array(600);
  for (let i = 0; i < data.length; i++) data[i] = (i * 131 + 7) & 0xff;
  for (let n = 0; n <= data.length; n++) {
    const piece = data.subarray(0, n);
    h3.init();
    h3.update(piece);
    assert.equal(xxh3_64(piece), BigInt("0x" + h3.digest("hex")), `xxh3 of ${n} bytes`);
    h32.init();
    h32.update(piece);
    assert.equal(xxh32(piece), parseInt(h32.digest("hex"), 16), `xxh32 of ${n} bytes`);
  }
  const big = new Uint8Array(1 << 20).map((_, i) => i * 7);
  h3.init();
  h3.update(big);
  assert.equal(xxh3_64(big), BigInt("0x" + h3.digest("hex")), "xxh3 of 1 MiB");
});

Deno.test("sealBatchXxh3() refuses a frame that runs past the batch and seals nothing", () => {
  const batch = new Uint8Array(256 + 48 + 4);
  new DataView(batch.buffer).setUint32(256 + 36, 5, true); // payload of 5 in 4 bytes
  batch[0] = 9;
  assert.throws(() => sealBatchXxh3(batch, 1), /Frame 0 of 1 runs past/);
  assert.equal(batch[40], 0);
  assert.throws(() => sealBatchXxh3(new Uint8Array(256 + 10), 1), /Frame 0 of 1/);
});

import assert from "node:assert/strict";
import { ByteReader, ByteWriter, toHex } from "./bytes.ts";
import {
  decodeUserHeaders,
  encodeUserHeaders,
  readName,
  writeConsumer,
  writeIdentifier,
  writeName,
  writeNumericIdentifier,
  writePartition,
  writePartitionIdPartitioning,
  writePollingStrategy,
  writeU64Option,
} from "./encoding.ts";

function hex(f: (w: ByteWriter) => unknown): string {
  const w = new ByteWriter(4);
  f(w);
  return toHex(w.finish());
}

Deno.test("writeName() writes a u8 length and UTF-8, and refuses 0 or >255 bytes", () => {
  assert.equal(hex((w) => writeName(w, "ab")), "026162");
  assert.equal(hex((w) => writeName(w, "é")), "02c3a9");
  assert.throws(() => hex((w) => writeName(w, "")), /1\.\.255/);
  assert.throws(() => hex((w) => writeName(w, "x".repeat(256))), /1\.\.255/);
  assert.equal(readName(new ByteReader(new Uint8Array([2, 0x61, 0x62]))), "ab");
});

Deno.test("writeIdentifier() writes kind 2 string ids; writeNumericIdentifier() kind 1", () => {
  assert.equal(
    hex((w) => writeIdentifier(w, "sensors")),
    "0207" + toHex(new TextEncoder().encode("sensors")),
  );
  assert.equal(hex((w) => writeNumericIdentifier(w, 1)), "010401000000");
});

Deno.test("writeConsumer() writes kind 1 and a string identifier", () => {
  assert.equal(hex((w) => writeConsumer(w, "c")), "01020163");
});

Deno.test("writePartition() writes 5 bytes, flag first", () => {
  assert.equal(hex((w) => writePartition(w, 3)), "0103000000");
  assert.equal(hex((w) => writePartition(w, undefined)), "0000000000");
});

Deno.test("writePartitionIdPartitioning() and writePollingStrategy() layouts", () => {
  assert.equal(hex((w) => writePartitionIdPartitioning(w, 2)), "020402000000");
  assert.equal(hex((w) => writePollingStrategy(w, 1, 258)), "01" + "0201000000000000");
});

Deno.test("encodeUserHeaders() writes string-kind TLV and decodeUserHeaders() reads it back", () => {
  const headers = new Map([["mqtt-topic", "a/b"], ["k", "v"]]);
  const bytes = encodeUserHeaders(headers);
  assert.equal(
    toHex(bytes.subarray(0, 11)),
    "02" + "0a000000" + toHex(new TextEncoder().encode("mqtt-t")),
  );
  assert.deepEqual(decodeUserHeaders(bytes), headers);
  assert.equal(encodeUserHeaders(new Map()).length, 0);
  assert.throws(() => encodeUserHeaders(new Map([["k", ""]])), /1\.\.255/);
});

Deno.test("decodeUserHeaders() renders numeric kinds as text and rejects bad sizes", () => {
  const ok = new Uint8Array([2, 1, 0, 0, 0, 0x6e, 11, 4, 0, 0, 0, 42, 0, 0, 0]);
  assert.deepEqual(decodeUserHeaders(ok), new Map([["n", "42"]]));
  const bad = new Uint8Array([2, 1, 0, 0, 0, 0x6e, 11, 2, 0, 0, 0, 42, 0]);
  assert.throws(() => decodeUserHeaders(bad), /kind 11/);
  assert.throws(() => decodeUserHeaders(new Uint8Array([2, 5, 0])), /Truncated/);
});

Deno.test("writeU64Option() writes a string key and a Uint64 (kind 12) value", () => {
  assert.equal(
    hex((w) => writeU64Option(w, "m", 1)),
    "02" + "01000000" + "6d" + "0c" + "08000000" + "0100000000000000",
  );
});

import assert from "node:assert/strict";
import {
  formatVersion,
  packVersion,
  PROTOCOL_VERSION,
  PROTOCOL_VERSION_PACKED,
  unpackVersion,
} from "./version.ts";

Deno.test("PROTOCOL_VERSION_PACKED is 0.11.0 = 0x2C00", () => {
  assert.equal(formatVersion(PROTOCOL_VERSION), "0.11.0");
  assert.equal(PROTOCOL_VERSION_PACKED, 0x2c00);
});

Deno.test("packVersion() and unpackVersion() round-trip major<<20|minor<<10|patch", () => {
  const v = { major: 1, minor: 12, patch: 3 };
  assert.equal(packVersion(v), (1 << 20) | (12 << 10) | 3);
  assert.deepEqual(unpackVersion(packVersion(v)), v);
  assert.equal(formatVersion(0x3000), "0.12.0");
});

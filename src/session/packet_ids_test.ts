import assert from "node:assert/strict";
import { PacketIdSet } from "./packet_ids.ts";

Deno.test("PacketIdSet holds ids 1..65535 once each and gives its bitmap back when empty", () => {
  const s = new PacketIdSet();
  assert.equal(s.has(1), false);
  assert.equal(s.delete(1), false);
  assert.equal(s.add(1), true);
  assert.equal(s.add(1), false, "already held");
  assert.equal(s.add(65535), true);
  assert.equal(s.add(8), true);
  assert.deepEqual([s.has(1), s.has(2), s.has(8), s.has(65535), s.size], [
    true,
    false,
    true,
    true,
    3,
  ]);
  for (const id of [1, 8, 65535]) assert.equal(s.delete(id), true);
  assert.equal(s.size, 0);
  assert.equal(s.has(65535), false);
  for (let id = 1; id <= 65535; id++) s.add(id);
  assert.equal(s.size, 65535, "the id space is the bound");
});

import assert from "node:assert/strict";
import * as mapping from "./mod.ts";

Deno.test("mod.ts exports exactly the mapping API", () => {
  assert.deepEqual(Object.keys(mapping).sort(), [
    "MapError",
    "checkResolution",
    "compileMap",
    "constantTargets",
    "explainJson",
    "initPartitioner",
    "isValidIggyName",
    "partitionForKey",
    "resolveTopic",
  ]);
});

Deno.test("partitionForKey() works without waiting for initPartitioner()", () => {
  // The hash module loads synchronously on first use (base/xxhash.ts).
  assert.equal(mapping.partitionForKey("sensor-1", 3), 1); // IGGY.md §5
});

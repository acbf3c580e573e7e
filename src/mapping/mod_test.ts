import assert from "node:assert/strict";
import * as mapping from "./mod.ts";

Deno.test("mod.ts exports exactly the mapping API", () => {
  assert.deepEqual(Object.keys(mapping).sort(), [
    "MapError",
    "checkResolution",
    "compileMap",
    "constantTargets",
    "filterMatches",
    "filterProblem",
    "isValidIggyName",
    "isWildcardFilter",
    "partitionForKey",
    "resolveFilter",
    "resolveTopic",
  ]);
});

Deno.test("partitionForKey() needs no initialisation (XXH32 loads no WebAssembly)", async () => {
  // Runs in a fresh worker, so nothing of this file's other tests has run there first.
  const url = new URL("./mod.ts", import.meta.url).href;
  const code = `import { partitionForKey } from ${JSON.stringify(url)};
    try { postMessage(String(partitionForKey("sensor-1", 3))); }
    catch (e) { postMessage(String(e.message)); }`;
  const worker = new Worker(URL.createObjectURL(new Blob([code], { type: "text/javascript" })), {
    type: "module",
  });
  const message = await new Promise<string>((resolve) => {
    worker.onmessage = (e) => resolve(e.data);
  });
  worker.terminate();
  assert.equal(message, "1", "XXH32('sensor-1') % 3");
});

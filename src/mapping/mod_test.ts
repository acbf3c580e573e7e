import assert from "node:assert/strict";
import * as mapping from "./mod.ts";

Deno.test("mod.ts exports exactly the mapping API", () => {
  assert.deepEqual(Object.keys(mapping).sort(), [
    "MapError",
    "checkResolution",
    "compileMap",
    "constantTargets",
    "explainJson",
    "filterMatches",
    "filterProblem",
    "initPartitioner",
    "isValidIggyName",
    "isWildcardFilter",
    "partitionForKey",
    "resolveFilter",
    "resolveTopic",
  ]);
});

Deno.test("partitionForKey() throws a clear error before initPartitioner()", async () => {
  // Runs in a fresh worker so this file's other tests cannot have initialised the hasher.
  const url = new URL("./mod.ts", import.meta.url).href;
  const code = `import { partitionForKey } from ${JSON.stringify(url)};
    try { partitionForKey("k", 3); postMessage("no error"); }
    catch (e) { postMessage(String(e.message)); }`;
  const worker = new Worker(URL.createObjectURL(new Blob([code], { type: "text/javascript" })), {
    type: "module",
  });
  const message = await new Promise<string>((resolve) => {
    worker.onmessage = (e) => resolve(e.data);
  });
  worker.terminate();
  assert.equal(
    message,
    "Cannot hash a partition key: call initPartitioner() once at startup first",
  );
});

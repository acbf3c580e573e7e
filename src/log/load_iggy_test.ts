/**
 * The Iggy client loaded by URL (`load_iggy.ts`) is `iggy/mod.ts` itself.
 */
import assert from "node:assert/strict";
import * as real from "./iggy/mod.ts";
import { loadIggy } from "./load_iggy.ts";

Deno.test("loadIggy() loads iggy/mod.ts", async () => {
  const loaded = await loadIggy();
  assert.equal(loaded.IggyBackend, real.IggyBackend);
  assert.equal(loaded.loginRefusalOf, real.loginRefusalOf);
});

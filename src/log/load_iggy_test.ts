/**
 * The Iggy client loaded by URL (`load_iggy.ts`) is the module its declared type describes:
 * the assignment below fails the type check when `iggy/mod.ts` drifts from it.
 */
import assert from "node:assert/strict";
import * as real from "./iggy/mod.ts";
import { type IggyModule, loadIggy } from "./load_iggy.ts";

Deno.test("loadIggy() loads iggy/mod.ts, whose IggyBackend matches the declared type", async () => {
  const declared: IggyModule = real;
  const loaded = await loadIggy();
  assert.equal(loaded.IggyBackend, declared.IggyBackend);
});

/** The console's handlers are loaded by URL (`console_routes.ts`): the URL names the module. */
import assert from "node:assert/strict";
import * as real from "./console_handlers.ts";
import { loadConsoleHandlers } from "./console_routes.ts";

Deno.test("loadConsoleHandlers() loads console_handlers.ts", async () => {
  const loaded = await loadConsoleHandlers();
  assert.equal(loaded.handleStatusRoute, real.handleStatusRoute);
  assert.equal(loaded.handleAdmin, real.handleAdmin);
});

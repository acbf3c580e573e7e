import assert from "node:assert/strict";
import { BackendError } from "../port.ts";
import { isStoreFull, toBackendError } from "./_errors.ts";

Deno.test("a full disk (ENOSPC from a real write) counts as a full store, retryable", () => {
  let error: unknown;
  const file = Deno.openSync("/dev/full", { write: true });
  try {
    file.writeSync(new Uint8Array(16));
  } catch (e) {
    error = e;
  } finally {
    file.close();
  }
  assert.ok(error, "writing to /dev/full did not fail");
  assert.equal(isStoreFull(error), true);
  const mapped = toBackendError("append", "data/x.db", error);
  assert.equal(mapped.code, "full");
  assert.equal(mapped.retryable, true);
  assert.equal(isStoreFull(new BackendError("unavailable", "no")), false);
  assert.equal(isStoreFull(new Error("disk on fire")), false);
});

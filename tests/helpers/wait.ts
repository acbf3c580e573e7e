/**
 * The bounded, named wait of the tests, in a file of its own so that unit tests under src/ can
 * use it without importing the whole gateway (gateway.ts re-exports it).
 *
 * @module
 */

/** Waits until `cond()` is true or fails after timeoutMs. */
export async function waitFor(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
  what = "condition",
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

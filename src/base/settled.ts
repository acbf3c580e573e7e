/**
 * A value that may still move for a moment, read until it stops: `read()` again after each
 * short look, at most `looks` times, until two reads agree. The read-backs after a cut
 * connection use it on a partition's end: the server may store a cut-off send a moment later.
 *
 * @module
 */

/** Looks of {@link settled}: how long each waits and how many at most. */
export const SETTLE = { lookMs: 50, looks: 3 } as const;

/** `read()` once it returns the same value twice in a row (or after the last look). */
export async function settled(
  read: () => Promise<number>,
  lookMs: number = SETTLE.lookMs,
  looks: number = SETTLE.looks,
): Promise<number> {
  let value = await read();
  for (let i = 0; i < looks; i++) {
    await new Promise((r) => setTimeout(r, lookMs));
    const again = await read();
    if (again === value) break;
    value = again;
  }
  return value;
}

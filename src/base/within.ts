/**
 * A wait with a bound that does not cancel what it waits for: a stop that must end on time
 * goes on without the step that did not.
 *
 * @module
 */

/** True when `p` resolves within `ms`; false at `ms` (`p` goes on, unawaited). */
export async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((r) => timer = setTimeout(() => r(false), Math.max(0, ms)));
  try {
    return await Promise.race([p.then(() => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

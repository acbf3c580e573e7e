/**
 * The backlogs waiting for one client queue to drain (`pacing.ts`): each is woken at the
 * queue's next write or acknowledgement, or gives up earlier.
 *
 * @module
 */

/** Waiters for one queue's next drain. */
export class DrainWaiters {
  #waiters: Set<() => void> | null = null;

  /** Whether some backlog waits. */
  get waiting(): boolean {
    return this.#waiters !== null;
  }

  /**
   * Resolves at the next {@link wake}, or when `stop` resolves; then, if no one else waits,
   * `onLast` runs (the queue may end a pause nobody needs any more).
   */
  add(stop?: Promise<void>, onLast?: () => void): Promise<void> {
    return new Promise((resolve) => {
      const waiters = this.#waiters ??= new Set();
      waiters.add(resolve);
      stop?.then(() => {
        if (!waiters.delete(resolve)) return; // woken already
        resolve();
        if (waiters.size === 0 && this.#waiters === waiters) {
          this.#waiters = null;
          onLast?.();
        }
      });
    });
  }

  /** Wakes every waiter. */
  wake(): void {
    const w = this.#waiters;
    if (w === null) return;
    this.#waiters = null;
    for (const r of w) r();
  }
}

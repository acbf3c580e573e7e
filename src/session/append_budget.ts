/**
 * Global bound on messages waiting for the backend (`limits.max_pending_appends`). When it is
 * reached, connections stop reading their sockets until appends confirm, so a slow or
 * stalled backend fills TCP windows instead of memory.
 *
 * @module
 */

/** Counter of in-flight appended messages with waiters for room. */
export class AppendBudget {
  pending = 0;
  #waiters: (() => void)[] = [];
  constructor(readonly max: number) {}

  get full(): boolean {
    return this.pending >= this.max;
  }

  add(n: number): void {
    this.pending += n;
  }

  release(n: number): void {
    this.pending -= n;
    if (this.pending < this.max && this.#waiters.length > 0) {
      const w = this.#waiters;
      this.#waiters = [];
      for (const r of w) r();
    }
  }

  /** Resolves when there is room again. */
  room(): Promise<void> {
    if (!this.full) return Promise.resolve();
    return new Promise((r) => this.#waiters.push(r));
  }
}

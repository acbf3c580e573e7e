/**
 * One timer structure for every connection's deadline (keep-alive, connect timeout), instead
 * of a timer per connection per packet. Connections only record activity
 * (`touch`, O(1)); a single interval sweeps buckets of due deadlines and re-files the ones
 * that saw activity since.
 *
 * @module
 */
import type { Clock } from "./clock.ts";

/** Something with a deadline. */
export interface DeadlineOwner {
  /** Last time (ms) the owner saw activity. */
  lastActivity: number;
  /** Allowed silence (ms); 0 = no deadline. */
  timeoutMs: number;
  /** Called once when the owner was silent for `timeoutMs`. */
  expire(): void;
  /**
   * The wheel's own field: the slot that holds the owner, undefined while none does. On the
   * owner, not in a map of the wheel's: a map entry per connection cost more memory.
   */
  deadlineSlot?: number;
}

/** A bucketed deadline wheel with a fixed resolution. */
export class DeadlineWheel {
  #buckets = new Map<number, Set<DeadlineOwner>>();
  #size = 0;
  #clock: Clock;
  #resolution: number;
  #timer: ReturnType<typeof setInterval> | undefined;
  #lastSwept: number;

  constructor(clock: Clock, resolutionMs = 250) {
    this.#clock = clock;
    this.#resolution = resolutionMs;
    this.#lastSwept = Math.floor(clock.now() / resolutionMs);
  }

  /** Starts the single interval timer (not started in tests that call `sweep` directly). */
  start(): void {
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.sweep(), this.#resolution);
      Deno.unrefTimer(this.#timer as unknown as number);
    }
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Number of owners tracked. */
  get size(): number {
    return this.#size;
  }

  /** Tracks `owner` (or re-files it after its timeout changed). */
  add(owner: DeadlineOwner): void {
    this.remove(owner);
    if (owner.timeoutMs <= 0) return;
    this.#file(owner, owner.lastActivity + owner.timeoutMs);
  }

  remove(owner: DeadlineOwner): void {
    const slot = owner.deadlineSlot;
    if (slot === undefined) return;
    owner.deadlineSlot = undefined;
    this.#size--;
    const b = this.#buckets.get(slot);
    b?.delete(owner);
    if (b?.size === 0) this.#buckets.delete(slot);
  }

  /** Expires every owner whose deadline has passed; re-files the rest of the due buckets. */
  sweep(): void {
    const now = this.#clock.now();
    const nowSlot = Math.floor(now / this.#resolution);
    for (let slot = this.#lastSwept; slot <= nowSlot; slot++) {
      const b = this.#buckets.get(slot);
      if (!b) continue;
      this.#buckets.delete(slot);
      for (const owner of b) {
        owner.deadlineSlot = undefined;
        this.#size--;
        const deadline = owner.lastActivity + owner.timeoutMs;
        if (deadline <= now) owner.expire();
        else this.#file(owner, deadline);
      }
    }
    this.#lastSwept = nowSlot;
  }

  #file(owner: DeadlineOwner, deadline: number): void {
    // Round up so an owner never expires before its deadline.
    const slot = Math.max(Math.ceil(deadline / this.#resolution), this.#lastSwept);
    let b = this.#buckets.get(slot);
    if (!b) this.#buckets.set(slot, b = new Set());
    b.add(owner);
    owner.deadlineSlot = slot;
    this.#size++;
  }
}

/**
 * A sender's order across a failed append (`AppendRequest.orderGroup`): once an append of a
 * group fails, its later appends still queued in the group commit (_group_commit.ts) are
 * rejected instead of written. Written, they would land before the device's resend of the
 * failed message, out of the order it sent them.
 *
 * @module
 */
import { BackendError } from "../port.ts";

/** What of a queued append this needs. */
interface Grouped {
  readonly orderGroup?: object;
  readonly syncLater?: boolean;
  readonly reject: (error: unknown) => void;
}

/** The order groups with a failed append. */
export class OrderGroups {
  readonly #failed = new WeakSet<object>();
  /** Set at the first failure of a grouped append: until then no queue is filtered. */
  #any = false;

  /** The append failed: its group's later appends are not written. QoS 0 only: nobody waits. */
  noteFailed(a: Grouped): void {
    if (a.orderGroup === undefined || a.syncLater === true) return;
    this.#failed.add(a.orderGroup);
    this.#any = true;
  }

  /** `queue` without the appends of failed groups, which are rejected (`queue` if none). */
  drop<T extends Grouped>(queue: T[]): T[] {
    if (!this.#any) return queue;
    const failed = this.#failed;
    const gone = (a: T) => a.orderGroup !== undefined && failed.has(a.orderGroup);
    if (!queue.some(gone)) return queue;
    const error = new BackendError(
      "unavailable",
      "Not appended: an earlier append of the same connection failed (its messages keep their order)",
    );
    for (const a of queue) if (gone(a)) a.reject(error);
    return queue.filter((a) => !gone(a));
  }
}

/**
 * Backlogs paced by the client's socket. A catch-up, a replay, a share group's catch-up and a
 * retained set read from memory or the log, which has no reason to drop anything: each waits
 * for its client's queue instead. It polls only what the queue has room for in bytes (shared
 * with the client's other backlogs: several partitions behind one filter read ahead one
 * queue's room together), offers a copy only when it fits under the client's cap (a copy
 * larger than the cap only into an empty queue), and otherwise waits for the queue to drain:
 * a wake-up from the queue when bytes are written or acknowledged, not a timer. While it
 * waits the queue counts as paused, so a client that stops reading is evicted after
 * `slow_consumer_timeout_ms`, and one that reads is never evicted, whatever its backlog.
 *
 * @module
 */
import { H_TOPIC, type MqttView } from "../stored/envelope.ts";
import type { StoredMessage } from "../log/port.ts";
import { utf8Length } from "../base/utf8.ts";
import type { ClientQueue } from "./client_queue.ts";
import type { Target } from "./targets.ts";

/** How long a backlog waits when no drain of its own queue can wake it (ms). */
export const WAIT_MS = 10;

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Bytes a PUBLISH adds besides topic and payload, at most (header, lengths, packet id). */
const PUBLISH_OVERHEAD = 16;

/** Bytes the copies of `targets` take in their queues, about (as `deliverCopies` counts). */
export function copiesBytes(
  targets: readonly Pick<Target, "prefix" | "props">[],
  view: MqttView,
): number {
  const base = utf8Length(view.topic) + view.payload.length + PUBLISH_OVERHEAD;
  let n = 0;
  for (const t of targets) n += base + 3 * t.prefix.length + (t.props?.length ?? 0);
  return n;
}

/** Bytes one copy of a stored message takes, about, before its targets are known. */
export function storedBytes(m: StoredMessage): number {
  return m.payload.length + (m.headers.get(H_TOPIC)?.length ?? 0) + PUBLISH_OVERHEAD;
}

/**
 * Waits until `q` takes a backlog's copies of `bytes`; false once it is closed. Held back only
 * by the global cap, with nothing of its own queued, no drain of its own would come: then it
 * looks again after {@link WAIT_MS}.
 */
export async function roomFor(q: ClientQueue, bytes: number): Promise<boolean> {
  for (;;) {
    if (q.closed) return false;
    if (q.blockedBy(bytes) === null) return true;
    if (q.queuedBytes > 0) await q.drain();
    else await sleep(WAIT_MS);
  }
}

/**
 * Waits until one of `queues` takes `bytes` (or all are closed); meanwhile every one of them
 * that holds bytes counts as paused, until one has room: then the others' pauses end (when
 * under their cap and nothing else waits for them), so no clock runs on a client nothing waits
 * for.
 */
export async function roomInAny(queues: readonly ClientQueue[], bytes: number): Promise<void> {
  let stop = () => {};
  const stopped = new Promise<void>((r) => stop = r);
  const pending = new Map<ClientQueue, Promise<void>>(); // one wait per queue, not per round
  try {
    for (;;) {
      let open = 0;
      const drains: Promise<void>[] = [];
      for (const q of queues) {
        if (q.closed) continue;
        if (q.blockedBy(bytes) === null) return;
        open++;
        if (q.queuedBytes === 0) continue;
        let wait = pending.get(q);
        if (wait === undefined) {
          wait = q.drain(stopped).then(() => void pending.delete(q));
          pending.set(q, wait);
        }
        drains.push(wait);
      }
      if (open === 0) return;
      await (drains.length === open ? Promise.race(drains) : sleep(WAIT_MS));
    }
  } finally {
    stop();
  }
}

/**
 * How many messages one backlog polls at once: what its client's queue has room for (its cap
 * less what is queued and what the client's other backlogs have polled and not offered yet),
 * at the size of the largest message of its last poll (one message at first), at most
 * `poll_batch_size`. What it polls stays reserved on the queue until it is offered.
 */
export class ReadAhead {
  #largest = 0;
  #reserved = 0;

  constructor(
    private readonly maxClientBytes: number,
    private readonly pollBatch: number,
  ) {}

  /** Messages to poll now, up to `left`, reserved on `q`; 0: wait for it to drain first. */
  reserve(q: ClientQueue, left: number): number {
    const used = q.heldBytes + q.readAhead;
    const room = this.maxClientBytes - used;
    let n: number;
    if (this.#largest === 0) n = room > 0 || used === 0 ? 1 : 0;
    else if (room >= this.#largest) n = Math.floor(room / this.#largest);
    else n = used === 0 ? 1 : 0; // a message larger than the cap, alone
    n = Math.min(n, left, this.pollBatch);
    this.#hold(q, n * Math.max(this.#largest, 1));
    return n;
  }

  /** The poll came back: the reservation becomes the bytes of what it holds. */
  polled(q: ClientQueue, batch: readonly StoredMessage[]): void {
    let total = 0;
    let largest = 0;
    for (const m of batch) {
      const b = storedBytes(m);
      total += b;
      if (b > largest) largest = b;
    }
    if (largest > 0) this.#largest = largest;
    this.#hold(q, total);
  }

  /** A polled message was offered (or passed over): its bytes leave the reservation. */
  offered(q: ClientQueue, m: StoredMessage): void {
    this.#hold(q, Math.max(0, this.#reserved - storedBytes(m)));
  }

  /** Gives back what is still reserved (a failed poll, the end of a batch). */
  release(q: ClientQueue): void {
    this.#hold(q, 0);
  }

  #hold(q: ClientQueue, bytes: number): void {
    q.readAhead += bytes - this.#reserved;
    this.#reserved = bytes;
  }
}

/** Waits for `q` to drain a little (or a moment, when nothing of its own is queued). */
export async function drained(q: ClientQueue): Promise<void> {
  if (q.queuedBytes > 0) await q.drain();
  else await sleep(WAIT_MS);
}

/**
 * How long a live reader waits at most for a QoS 1 subscriber at its hard cap to make progress
 * (a write or an acknowledgement) before evicting it (ms); shorter when
 * `slow_consumer_timeout_ms` is. A subscriber that reads holds its readers only while it drains;
 * one that stopped reading holds them this long at most.
 */
export const HARD_CAP_GRACE_MS = 1000;

/** Bytes a QoS 1 or 2 copy for `t` takes in its queue, as `deliverCopies` counts it. */
function copyBytesOf(t: Pick<Target, "prefix" | "props">, view: MqttView): number {
  return utf8Length(t.prefix) + utf8Length(view.topic) + view.payload.length + 8 +
    (t.props?.length ?? 0);
}

/**
 * The QoS 1 and 2 targets whose copy of `view` would take their queue past its hard cap, each
 * with the bytes of its copy; null when none would (the common case: nothing allocated).
 */
export function overHardCap(
  targets: readonly Target[],
  view: MqttView,
): [ClientQueue, number][] | null {
  let out: [ClientQueue, number][] | null = null;
  for (const t of targets) {
    if (t.qos === 0 || t.client.queuedBytes === 0) continue;
    const bytes = copyBytesOf(t, view);
    if (t.client.overHardCap(bytes)) (out ??= []).push([t.client, bytes]);
  }
  return out;
}

/**
 * Waits until each queue takes its copy under its hard cap, or is closed. A live burst larger
 * than the queue can hold thereby waits in the log, not in memory, for a subscriber that
 * reads; one that makes no progress for `graceMs` (no write, no acknowledgement) is evicted.
 */
export async function roomUnderHardCap(
  full: readonly [ClientQueue, number][],
  graceMs: number,
  evict: (q: ClientQueue, reason: string) => void,
): Promise<void> {
  for (const [q, bytes] of full) {
    while (!q.closed && q.overHardCap(bytes)) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const stalled = new Promise<boolean>((r) => timer = setTimeout(() => r(true), graceMs));
      const progressed = q.drain().then(() => false);
      const timedOut = await Promise.race([progressed, stalled]);
      clearTimeout(timer);
      if (timedOut) {
        evict(q, `slow consumer: at the hard cap of outbound bytes, no progress for ${graceMs} ms`);
      }
    }
  }
}

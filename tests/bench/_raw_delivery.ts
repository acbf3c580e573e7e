/**
 * The delivery scenarios (fan-out and 1:1) over {@link RawSocket}: the publisher and every
 * subscriber in one synchronous epoll loop, deliveries counted by scanning the received bytes
 * ({@link Inboxes}). Like `_raw_load.ts`, the loop blocks the event loop by design, and ends by
 * its own clock whatever the server does.
 *
 * @module
 */
import { connectRaw, primeRaw, RawPublisher, subscribeRaw } from "./_raw_client.ts";
import { Inboxes } from "./_raw_inbox.ts";
import { EPOLLIN, EPOLLOUT, Poller } from "./_raw_socket.ts";

/** What both delivery scenarios are given. */
export interface DeliveryOptions {
  readonly port: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly maxMsgs: number;
  readonly payload: Uint8Array;
  /** Starts the CPU window; its result is called at the end of the measured window. */
  readonly cpuWindow: () => () => Record<string, number>;
}

/** A publisher and its subscribers, connected and subscribed, in one poller. */
function setUp(o: DeliveryOptions, topic: string, name: string, subs: number, batch: number) {
  const pub = new RawPublisher(connectRaw(o.port, `${name}-pub`), topic, o.payload, batch);
  primeRaw(pub.sock, topic);
  const socks = Array.from({ length: subs }, (_, i) => connectRaw(o.port, `${name}-sub-${i}`));
  socks.forEach((s) => subscribeRaw(s, topic, 0));
  const inboxes = new Inboxes(socks);
  const poller = new Poller(subs + 8);
  socks.forEach((s, i) => poller.add(s, i, EPOLLIN));
  poller.add(pub.sock, subs, EPOLLIN);
  return { pub, inboxes, poller, pubIndex: subs };
}

/** The warm-up, then the measured window: when each starts and what was measured. */
class Window {
  readonly measureAt: number;
  readonly stopAt: number;
  measuring = false;
  #sent0 = 0;
  published = 0;
  elapsedMs = 0;
  cpu: Record<string, number> = {};
  #t0 = 0;
  #stopCpu: (() => Record<string, number>) | null = null;

  constructor(o: DeliveryOptions) {
    this.measureAt = performance.now() + o.warmupMs;
    this.stopAt = this.measureAt + o.durationMs;
  }

  /** Moves to the measured window when it is time; false once the window is over. */
  tick(o: DeliveryOptions, inboxes: Inboxes, sent: number): boolean {
    const now = performance.now();
    if (!this.measuring && now >= this.measureAt) {
      this.measuring = inboxes.measuring = true;
      this.#t0 = now;
      this.#sent0 = sent;
      this.#stopCpu = o.cpuWindow();
    }
    if (this.measuring && now >= this.stopAt) {
      this.measuring = inboxes.measuring = false;
      this.elapsedMs = now - this.#t0;
      this.published = sent - this.#sent0;
      this.cpu = this.#stopCpu!();
      return false;
    }
    return true;
  }
}

/** Deliveries per read fan-out's coalescing aims at (see {@link Coalescing}). */
const TARGET_PER_READ = 8;

/**
 * How long fan-out lets deliveries gather after a wake that found work, adapted after each wake
 * toward {@link TARGET_PER_READ} deliveries per read, within `[minUs, maxUs]`. Why: Mosquitto
 * writes every delivery on its own, and each read costs this process ~8 µs of kernel time here
 * whatever it holds (profiled: the TCP receive path, and the ACK each read that empties the
 * queue sends, processed on this core), ~0.3 µs per delivery in it besides. With a fixed 100 µs
 * wait a read held ~1.2 deliveries. A server that writes many deliveries per write (the
 * gateway) fills the reads by itself, and the wait stays at `minUs`.
 */
class Coalescing {
  us: number;
  readonly #minUs: number;
  readonly #maxUs: number;
  #reads = 0;
  #publishes = 0;

  constructor(minUs: number, maxUs: number) {
    this.#minUs = minUs;
    this.#maxUs = Math.max(minUs, maxUs);
    this.us = minUs;
  }

  /** After a wake: longer when its reads held fewer deliveries than the target, else shorter. */
  adapt(inboxes: Inboxes): void {
    const reads = inboxes.reads - this.#reads;
    const publishes = inboxes.publishes - this.#publishes;
    this.#reads = inboxes.reads;
    this.#publishes = inboxes.publishes;
    if (reads === 0) return;
    // Damped (square root) and bounded per wake: one wake's count is noisy.
    const want = TARGET_PER_READ * reads / Math.max(1, publishes);
    const step = Math.sqrt(Math.min(4, Math.max(0.25, want)));
    this.us = Math.min(this.#maxUs, Math.max(this.#minUs, this.us * step));
  }
}

/**
 * Fan-out: one QoS 0 publisher at max rate bounded by `window` messages beyond the slowest
 * subscriber's highest sequence number seen, in batches of up to 50 per write; wakes coalesced
 * ({@link Coalescing}, {@link Poller.waitCoalesced}) by `coalesceUs` to `maxCoalesceUs`, which
 * the latency includes.
 */
export function fanoutRaw(
  o: DeliveryOptions & {
    readonly subs: number;
    readonly window: number;
    readonly coalesceUs: number;
    readonly maxCoalesceUs: number;
  },
) {
  const batch = Math.min(50, o.window);
  const { pub, inboxes, poller, pubIndex } = setUp(o, "bench/fan", "bench-fan", o.subs, batch);
  const scratch = new Uint8Array(4096);
  const w = new Window(o);
  const coalescing = new Coalescing(o.coalesceUs, o.maxCoalesceUs);
  let writable = true;
  while (w.tick(o, inboxes, pub.seq)) {
    if (writable) {
      const slowest = inboxes.slowest();
      while (pub.seq - 1 - slowest + batch <= o.window && pub.seq < o.maxMsgs) {
        if (!pub.send(batch)) {
          writable = false;
          poller.modify(pub.sock, pubIndex, EPOLLIN | EPOLLOUT);
          break;
        }
      }
    }
    // The timeout only bounds a stall (a dropped copy does not hold the window: it counts the
    // highest sequence number seen).
    const n = poller.waitCoalesced(Math.round(coalescing.us), 5);
    for (let k = 0; k < n; k++) {
      const i = poller.readyIndex[k];
      if (i !== pubIndex) {
        inboxes.read(i);
        continue;
      }
      if (poller.readyEvents[k] & EPOLLIN) pub.discardInput(scratch);
      if ((poller.readyEvents[k] & EPOLLOUT) && pub.flush()) {
        writable = true;
        poller.modify(pub.sock, pubIndex, EPOLLIN);
      }
    }
    coalescing.adapt(inboxes);
  }
  return { ...finish(w, pub, inboxes, poller), coalesceUsAtEnd: Math.round(coalescing.us) };
}

/**
 * 1:1: one publisher sends QoS 0 at `rate` msg/s by the schedule (start + k / rate), one
 * subscriber receives. The wait lasts until the next send time (microseconds, `epoll_pwait2`)
 * or until the subscriber is readable, whichever is first, so it adds nothing to the latency
 * from the send time in the payload to the read that receives it.
 */
export function e2eRaw(o: DeliveryOptions & { readonly rate: number }) {
  const maxBatch = 64;
  const { pub, inboxes, poller, pubIndex } = setUp(o, "bench/e2e", "bench-e2e", 1, maxBatch);
  const scratch = new Uint8Array(4096);
  const w = new Window(o);
  const start = performance.now();
  const msPerMsg = 1000 / o.rate;
  let writable = true;
  while (w.tick(o, inboxes, pub.seq)) {
    const due = Math.floor((performance.now() - start) / msPerMsg) + 1 - pub.seq;
    if (writable && due > 0 && pub.seq < o.maxMsgs && !pub.send(Math.min(maxBatch, due))) {
      writable = false;
      poller.modify(pub.sock, pubIndex, EPOLLIN | EPOLLOUT);
    }
    const next = start + pub.seq * msPerMsg;
    const n = poller.waitUs(writable ? (next - performance.now()) * 1000 : 1000);
    for (let k = 0; k < n; k++) {
      const i = poller.readyIndex[k];
      if (i !== pubIndex) {
        inboxes.read(i);
        continue;
      }
      if (poller.readyEvents[k] & EPOLLIN) pub.discardInput(scratch);
      if ((poller.readyEvents[k] & EPOLLOUT) && pub.flush()) {
        writable = true;
        poller.modify(pub.sock, pubIndex, EPOLLIN);
      }
    }
  }
  return finish(w, pub, inboxes, poller);
}

/** Closes everything and returns the figures of the measured window. */
function finish(w: Window, pub: RawPublisher, inboxes: Inboxes, poller: Poller) {
  const totals = inboxes.totals();
  pub.sock.close();
  inboxes.close();
  poller.close();
  return {
    published: w.published,
    ...totals,
    elapsedMs: w.elapsedMs,
    deliveriesPerSec: totals.deliveries / (w.elapsedMs / 1000),
    latency: inboxes.latency.summary(),
    io: "libc-epoll",
    ...w.cpu,
  };
}

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
class Loop {
  readonly pub: RawPublisher;
  readonly inboxes: Inboxes;
  readonly poller: Poller;
  /** False while a batch waits for the publisher's socket to take the rest of it. */
  writable = true;
  readonly #pubIndex: number;
  readonly #scratch = new Uint8Array(4096);

  constructor(o: DeliveryOptions, topic: string, name: string, subs: number, batch: number) {
    this.pub = new RawPublisher(connectRaw(o.port, `${name}-pub`), topic, o.payload, batch);
    primeRaw(this.pub.sock, topic);
    const socks = Array.from({ length: subs }, (_, i) => connectRaw(o.port, `${name}-sub-${i}`));
    socks.forEach((s) => subscribeRaw(s, topic, 0));
    this.inboxes = new Inboxes(socks);
    this.poller = new Poller(subs + 8);
    socks.forEach((s, i) => this.poller.add(s, i, EPOLLIN));
    this.#pubIndex = subs;
    this.poller.add(this.pub.sock, subs, EPOLLIN);
  }

  /** Sends `n` stamped PUBLISHes; what the socket did not take goes out when it is writable. */
  send(n: number): void {
    if (this.pub.send(n)) return;
    this.writable = false;
    this.poller.modify(this.pub.sock, this.#pubIndex, EPOLLIN | EPOLLOUT);
  }

  /** Serves the `n` sockets the last wait returned: subscribers read, the publisher flushed. */
  serve(n: number): void {
    const p = this.poller;
    for (let k = 0; k < n; k++) {
      const i = p.readyIndex[k];
      if (i !== this.#pubIndex) {
        this.inboxes.read(i);
        continue;
      }
      if (p.readyEvents[k] & EPOLLIN) this.pub.discardInput(this.#scratch);
      if ((p.readyEvents[k] & EPOLLOUT) && this.pub.flush()) {
        this.writable = true;
        p.modify(this.pub.sock, this.#pubIndex, EPOLLIN);
      }
    }
  }

  /** Closes everything and returns the figures of the measured window. */
  finish(w: Window) {
    const totals = this.inboxes.totals();
    this.pub.sock.close();
    this.inboxes.close();
    this.poller.close();
    return {
      published: w.published,
      ...totals,
      elapsedMs: w.elapsedMs,
      deliveriesPerSec: totals.deliveries / (w.elapsedMs / 1000),
      latency: this.inboxes.latency.summary(),
      io: "libc-epoll",
      ...w.cpu,
    };
  }
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
  const loop = new Loop(o, "bench/fan", "bench-fan", o.subs, batch);
  const { pub, inboxes, poller } = loop;
  const w = new Window(o);
  const coalescing = new Coalescing(o.coalesceUs, o.maxCoalesceUs);
  while (w.tick(o, inboxes, pub.seq)) {
    const slowest = inboxes.slowest();
    while (loop.writable && pub.seq - 1 - slowest + batch <= o.window && pub.seq < o.maxMsgs) {
      loop.send(batch);
    }
    // The timeout only bounds a stall (a dropped copy does not hold the window: it counts the
    // highest sequence number seen).
    loop.serve(poller.waitCoalesced(Math.round(coalescing.us), 5));
    coalescing.adapt(inboxes);
  }
  return { ...loop.finish(w), coalesceUsAtEnd: Math.round(coalescing.us) };
}

/**
 * 1:1: one publisher sends QoS 0 at `rate` msg/s by the schedule (start + k / rate), one
 * subscriber receives. The wait lasts until the next send time (microseconds, `epoll_pwait2`)
 * or until the subscriber is readable, whichever is first, so it adds nothing to the latency
 * from the send time in the payload to the read that receives it.
 */
export function e2eRaw(o: DeliveryOptions & { readonly rate: number }) {
  const maxBatch = 64;
  const loop = new Loop(o, "bench/e2e", "bench-e2e", 1, maxBatch);
  const { pub, inboxes, poller } = loop;
  const w = new Window(o);
  const start = performance.now();
  const msPerMsg = 1000 / o.rate;
  while (w.tick(o, inboxes, pub.seq)) {
    const due = Math.floor((performance.now() - start) / msPerMsg) + 1 - pub.seq;
    if (due > 0 && loop.writable && pub.seq < o.maxMsgs) loop.send(Math.min(maxBatch, due));
    // Until the next send time; with nothing to send (all sent, or a write pending), 1 ms.
    const untilNextUs = (start + pub.seq * msPerMsg - performance.now()) * 1000;
    loop.serve(poller.waitUs(loop.writable && pub.seq < o.maxMsgs ? untilNextUs : 1000));
  }
  return loop.finish(w);
}

/**
 * An upstream for forwarder tests: a real log backend (the embedded one) behind a switch that
 * can take the uplink down and cut sends the way a reset connection does — before the send
 * reaches the server, or after the server stored it but before the confirmation came back.
 *
 * @module
 */
import { type AppendReceipt, BackendError } from "../../src/log/port.ts";
import type { ForwardTarget } from "../../src/forward/forwarder.ts";

/** How the next appends fail; `every` = fail one append in this many. */
export interface Faults {
  /** The uplink is down: opening fails, and so does every call. */
  down: boolean;
  /** Cut one append in `every` after it was stored upstream (outcome unknown to the sender). */
  cutAfterStoreEvery: number;
  /** Cut one append in `every` before it reaches the upstream. */
  cutBeforeStoreEvery: number;
  /** Each append takes at least this long (a WAN round trip), ms. */
  sendMs: number;
}

/** The switchable upstream and what it saw. */
export class FaultyUpstream {
  readonly faults: Faults = {
    down: false,
    cutAfterStoreEvery: 0,
    cutBeforeStoreEvery: 0,
    sendMs: 0,
  };
  appends = 0;
  cutAfter = 0;
  cutBefore = 0;
  readonly #inner: ForwardTarget;

  constructor(inner: ForwardTarget) {
    this.#inner = inner;
  }

  /** What the forwarder's opener returns: the inner backend with the faults in front. */
  open(): Promise<ForwardTarget> {
    if (this.faults.down) {
      return Promise.reject(new BackendError("unavailable", "uplink down (test)"));
    }
    const inner = this.#inner;
    const down = () => {
      if (this.faults.down) throw new BackendError("unavailable", "uplink down (test)");
    };
    const view: ForwardTarget = {
      kind: "faulty",
      open: () => Promise.resolve(),
      close: () => Promise.resolve(),
      health: () => this.faults.down ? { ready: false, reason: "down" } : inner.health(),
      authenticate: (u, p) => inner.authenticate(u, p),
      principalOf: (u) => inner.principalOf(u),
      listTopics: async () => (down(), await inner.listTopics()),
      getTopic: async (s, t) => (down(), await inner.getTopic(s, t)),
      createTopic: async (s, t, o) => (down(), await inner.createTopic(s, t, o)),
      append: (r) => this.#append(() => inner.append(r)),
      appendEncoded: (r) => this.#append(() => inner.appendEncoded(r)),
      poll: async (a, f, c) => (down(), await inner.poll(a, f, c)),
      nextOffset: async (a) => (down(), await inner.nextOffset(a)),
      storeOffset: async (c, a, o) => (down(), await inner.storeOffset(c, a, o)),
      getOffset: async (c, a) => (down(), await inner.getOffset(c, a)),
      deleteOffset: async (c, a) => (down(), await inner.deleteOffset(c, a)),
    };
    return Promise.resolve(view);
  }

  async #append(store: () => Promise<AppendReceipt>): Promise<AppendReceipt> {
    if (this.faults.down) throw new BackendError("unavailable", "uplink down (test)");
    const n = ++this.appends;
    const { cutBeforeStoreEvery: before, cutAfterStoreEvery: after } = this.faults;
    if (before > 0 && n % before === 0) {
      this.cutBefore++;
      throw new BackendError("unavailable", "connection reset before the send (test)");
    }
    if (this.faults.sendMs > 0) await new Promise((r) => setTimeout(r, this.faults.sendMs));
    const receipt = await store();
    if (after > 0 && n % after === 0) {
      this.cutAfter++;
      throw new BackendError("unavailable", "connection reset after the store (test)");
    }
    return receipt;
  }
}

/**
 * One epoll instance for every socket of the epoll layer. `epoll_wait` runs as a non-blocking
 * FFI call (Deno's blocking thread pool, a promise), so the JS thread never blocks and one
 * promise is paid per wake for all the sockets that are ready, not one per socket read.
 *
 * An edge-triggered socket that stops reading with bytes left (its share of one wake used
 * up) asks to be run {@link EpollLoop.again}: the next wake then does not wait, and it is
 * called as if epoll had reported it.
 *
 * The loop runs while something is registered (so an open socket keeps the process alive, as
 * with node:net) and ends when the last registration goes: an eventfd in the set wakes the
 * thread call then, so `deno` exits cleanly after a stop.
 *
 * @module
 */
import {
  EPOLL_CTL_ADD,
  EPOLL_CTL_DEL,
  EPOLL_CTL_MOD,
  EPOLLIN,
  errno,
  EV_DATA,
  EV_SIZE,
  type Libc,
  SOCK_CLOEXEC,
  SOCK_NONBLOCK,
  sysError,
} from "./_libc.ts";

/** What a registered descriptor is told when epoll reports it. */
export interface EpollHandler {
  onEvents(events: number): void;
}

/** Events read per wake; more ready descriptors are reported by the next wake. */
const MAX_EVENTS = 512;
/** Registration id of the wake eventfd. */
const WAKE_ID = 0;

/** The process's epoll loop. */
export class EpollLoop {
  readonly libc: Libc;
  readonly #epfd: number;
  readonly #wakeFd: number;
  /**
   * Handler and registration id by fd (dense arrays: a Map entry per socket would be memory
   * per idle connection). Events carry fd and id, so a reused fd number cannot get old events.
   */
  readonly #handlers: (EpollHandler | undefined)[] = [];
  readonly #ids: number[] = [];
  #size = 0;
  readonly #events = new Uint8Array(MAX_EVENTS * EV_SIZE);
  readonly #view = new DataView(this.#events.buffer);
  readonly #ev = new Uint8Array(16);
  readonly #evView = new DataView(this.#ev.buffer);
  readonly #eight = new Uint8Array(8);
  #nextId = 1;
  #running = false;
  /** The thread call is waiting with no timeout (a handler asking `again` must wake it). */
  #waiting = false;
  /** Handlers to call again without an event, after the next wake. */
  #again: EpollHandler[] = [];

  constructor(libc: Libc) {
    this.libc = libc;
    this.#epfd = libc.epoll_create1(SOCK_CLOEXEC);
    if (this.#epfd < 0) throw sysError("epoll_create1", errno(libc));
    this.#wakeFd = libc.eventfd(0, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (this.#wakeFd < 0) throw sysError("eventfd", errno(libc));
    this.#ctl(EPOLL_CTL_ADD, this.#wakeFd, WAKE_ID, EPOLLIN);
    this.#ids[this.#wakeFd] = WAKE_ID;
  }

  /** A fresh registration id (wraps at 2³², far beyond the sockets open at once). */
  nextId(): number {
    const id = this.#nextId;
    this.#nextId = id === 0xffff_ffff ? 1 : id + 1;
    return id;
  }

  /** Watches `fd` for `events`; reported to `handler`. Throws when the kernel refuses. */
  add(fd: number, id: number, events: number, handler: EpollHandler): void {
    this.#ctl(EPOLL_CTL_ADD, fd, id, events);
    if (this.#handlers[fd] === undefined) this.#size++;
    this.#handlers[fd] = handler;
    this.#ids[fd] = id;
    if (!this.#running) this.#run();
  }

  /** Changes what a registered `fd` is watched for. */
  modify(fd: number, id: number, events: number): void {
    this.#ctl(EPOLL_CTL_MOD, fd, id, events);
  }

  /** Stops watching `fd` (before it is closed); the last one ends the loop. */
  remove(fd: number, id: number): void {
    if (this.#handlers[fd] === undefined || this.#ids[fd] !== id) return;
    this.#handlers[fd] = undefined;
    this.#size--;
    this.libc.epoll_ctl(this.#epfd, EPOLL_CTL_DEL, fd, this.#ev);
    if (this.#size === 0) this.#wake();
  }

  /**
   * Calls `handler.onEvents(EPOLLIN)` after the next wake, which will not wait: for an
   * edge-triggered socket with unread bytes, which epoll will not report again until more
   * arrive.
   */
  again(handler: EpollHandler): void {
    this.#again.push(handler);
    if (this.#waiting) this.#wake();
  }

  /** Registrations (listeners and sockets being watched). */
  get size(): number {
    return this.#size;
  }

  #ctl(op: number, fd: number, id: number, events: number): void {
    this.#evView.setUint32(0, events, true);
    this.#evView.setUint32(EV_DATA, fd, true);
    this.#evView.setUint32(EV_DATA + 4, id, true);
    if (this.libc.epoll_ctl(this.#epfd, op, fd, this.#ev) < 0) {
      throw sysError("epoll_ctl", errno(this.libc));
    }
  }

  #wake(): void {
    new DataView(this.#eight.buffer).setBigUint64(0, 1n, true);
    this.libc.write(this.#wakeFd, this.#eight, 8n);
  }

  async #run(): Promise<void> {
    this.#running = true;
    try {
      while (this.#size > 0) {
        const timeout = this.#again.length > 0 ? 0 : -1;
        this.#waiting = timeout < 0;
        const n = await this.libc.epoll_wait(this.#epfd, this.#events, MAX_EVENTS, timeout);
        this.#waiting = false;
        this.#dispatch(n);
        if (this.#again.length > 0) this.#runAgain();
      }
    } finally {
      this.#running = false;
    }
  }

  /** Calls the handlers that asked {@link again}, after this wake's events. */
  #runAgain(): void {
    const handlers = this.#again;
    this.#again = [];
    for (const h of handlers) notify(h, EPOLLIN);
  }

  /** Hands each reported event to its handler; a throwing handler does not stop the loop. */
  #dispatch(n: number): void {
    const view = this.#view;
    for (let i = 0; i < n; i++) {
      const events = view.getUint32(i * EV_SIZE, true);
      const fd = view.getUint32(i * EV_SIZE + EV_DATA, true);
      const id = view.getUint32(i * EV_SIZE + EV_DATA + 4, true);
      if (id === WAKE_ID) {
        this.libc.read(this.#wakeFd, this.#eight, 8n);
        continue;
      }
      if (this.#ids[fd] !== id) continue; // a closed socket's event; the fd is another's now
      const handler = this.#handlers[fd];
      if (handler !== undefined) notify(handler, events);
    }
  }
}

/** Tells one handler; a bug in one must not take every other socket down with it. */
function notify(handler: EpollHandler, events: number): void {
  try {
    handler.onEvents(events);
  } catch (err) {
    console.error("epoll socket layer: handler failed", err);
  }
}

let shared: EpollLoop | undefined;

/** The process's loop, made on first use. */
export function epollLoop(libc: Libc): EpollLoop {
  return shared ??= new EpollLoop(libc);
}

/**
 * Loopback TCP sockets driven straight through libc (Deno FFI): non-blocking file descriptors,
 * one `epoll_wait` per turn for every ready socket, `read`/`write` into caller-owned buffers.
 *
 * Why: a Deno `conn.read()` costs one async op, one promise and one wake-up per read. Mosquitto
 * writes every PUBACK on its own, so a promptly reading client wakes once per PUBACK; profiled,
 * the Deno-socket load generator spent ~10 µs of its own core per QoS 1 message (1.2 messages
 * per write, one read per PUBACK) and saturated at ~95k msg/s, before Mosquitto did. Here one
 * wake serves every socket that is ready, a read takes whatever has arrived, and nothing is
 * allocated per packet. Linux only (the benchmark reads /proc and pins cores anyway).
 *
 * @module
 */

const LIBC = Deno.dlopen("libc.so.6", {
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  connect: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  setsockopt: { parameters: ["i32", "i32", "i32", "buffer", "u32"], result: "i32" },
  getsockopt: { parameters: ["i32", "i32", "i32", "buffer", "buffer"], result: "i32" },
  read: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  close: { parameters: ["i32"], result: "i32" },
  poll: { parameters: ["buffer", "u64", "i32"], result: "i32" },
  epoll_create1: { parameters: ["i32"], result: "i32" },
  epoll_ctl: { parameters: ["i32", "i32", "i32", "buffer"], result: "i32" },
  epoll_wait: { parameters: ["i32", "buffer", "i32", "i32"], result: "i32" },
  // glibc ≥ 2.35: a timeout in nanoseconds (paced senders); without it, whole milliseconds.
  epoll_pwait2: {
    parameters: ["i32", "buffer", "i32", "buffer", "pointer"],
    result: "i32",
    optional: true,
  },
  usleep: { parameters: ["u32"], result: "i32" },
  __errno_location: { parameters: [], result: "pointer" },
});
const C = LIBC.symbols;

const AF_INET = 2;
const SOCK_STREAM = 1;
const SOCK_NONBLOCK = 0o4000;
const SOCK_CLOEXEC = 0o2000000;
const IPPROTO_TCP = 6;
const TCP_NODELAY = 1;
const SOL_SOCKET = 1;
const SO_ERROR = 4;
const EAGAIN = 11;
const EINTR = 4;
const EINPROGRESS = 115;
const POLLIN = 0x1;
const POLLOUT = 0x4;
/** epoll event bits. */
export const EPOLLIN = 0x1;
export const EPOLLOUT = 0x4;
/** Reported once, then disabled until the next {@link Poller.modify} re-arms it. */
export const EPOLLONESHOT = 1 << 30;
const EPOLL_CTL_ADD = 1;
const EPOLL_CTL_MOD = 3;
/** `struct epoll_event` is packed (12 bytes) on x86_64, naturally aligned (16) elsewhere. */
const EV_SIZE = Deno.build.arch === "x86_64" ? 12 : 16;
const EV_DATA = Deno.build.arch === "x86_64" ? 4 : 8;

function errno(): number {
  const p = C.__errno_location();
  return p === null ? 0 : new Deno.UnsafePointerView(p).getInt32();
}

/** What a non-blocking read or write returned: bytes, 0 for "would block", -1 for closed/error. */
function io(r: number | bigint): number {
  const n = Number(r);
  if (n >= 0) return n;
  const e = errno();
  return e === EAGAIN || e === EINTR ? 0 : -1;
}

/** Waits until `fd` is readable or writable (poll), at most `timeoutMs`; false on timeout. */
function waitFd(fd: number, events: number, timeoutMs: number): boolean {
  const pfd = new Uint8Array(8);
  const v = new DataView(pfd.buffer);
  v.setInt32(0, fd, true);
  v.setInt16(4, events, true);
  return C.poll(pfd, 1n, timeoutMs) > 0;
}

/** `struct sockaddr_in` for 127.0.0.1:`port`, one per port (connect() only reads it). */
const addrs = new Map<number, Uint8Array>();
function loopback(port: number): Uint8Array {
  let addr = addrs.get(port);
  if (addr === undefined) {
    addr = new Uint8Array(16);
    const v = new DataView(addr.buffer);
    v.setUint16(0, AF_INET, true);
    v.setUint16(2, port, false);
    addr.set([127, 0, 0, 1], 4);
    addrs.set(port, addr);
  }
  return addr;
}

/** A non-blocking loopback TCP connection. */
export class RawSocket {
  readonly fd: number;
  private constructor(fd: number) {
    this.fd = fd;
  }

  /**
   * Starts connecting to 127.0.0.1:`port` and returns at once (no TCP_NODELAY). The socket is
   * writable once connected; a write before that takes nothing (0), a write after a refused
   * connect fails (-1). Throws only when no socket can be made or connect() failed outright.
   */
  static open(port: number): RawSocket {
    const fd = C.socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) throw new Error(`socket() failed: errno ${errno()}`);
    if (C.connect(fd, loopback(port), 16) < 0 && errno() !== EINPROGRESS) {
      const e = errno();
      C.close(fd);
      throw new Error(`connect() to port ${port} failed: errno ${e}`);
    }
    return new RawSocket(fd);
  }

  /** Connects to 127.0.0.1:`port` with TCP_NODELAY; throws when it cannot within `timeoutMs`. */
  static connect(port: number, timeoutMs = 5000): RawSocket {
    const s = RawSocket.open(port);
    const fd = s.fd;
    if (!waitFd(fd, POLLOUT, timeoutMs) || s.#soError() !== 0) {
      s.close();
      throw new Error(`connect() to port ${port} failed or timed out`);
    }
    const one = new Uint8Array(new Int32Array([1]).buffer);
    C.setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, one, 4);
    return s;
  }

  #soError(): number {
    const val = new Int32Array(1);
    const len = new Uint32Array([4]);
    const r = C.getsockopt(
      this.fd,
      SOL_SOCKET,
      SO_ERROR,
      new Uint8Array(val.buffer),
      new Uint8Array(len.buffer),
    );
    return r < 0 ? errno() : val[0];
  }

  /** One `read` that tells end of stream (-1) from "nothing yet" (0). */
  readSome(buf: Uint8Array, at = 0): number {
    if (at >= buf.length) return 0;
    const r = Number(C.read(this.fd, at === 0 ? buf : buf.subarray(at), BigInt(buf.length - at)));
    if (r > 0) return r;
    if (r === 0) return -1; // end of stream
    const e = errno();
    return e === EAGAIN || e === EINTR ? 0 : -1;
  }

  /** Writes what the kernel takes now of `buf[from..to)`: bytes written, -1 on error. */
  write(buf: Uint8Array, from = 0, to = buf.length): number {
    if (from >= to) return 0;
    const view = from === 0 && to === buf.length ? buf : buf.subarray(from, to);
    return io(C.write(this.fd, view, BigInt(to - from)));
  }

  /** Writes all of `buf`, waiting (poll) while the socket is full; throws after `timeoutMs`. */
  writeAllBlocking(buf: Uint8Array, timeoutMs = 10_000): void {
    const deadline = performance.now() + timeoutMs;
    let off = 0;
    while (off < buf.length) {
      const n = this.write(buf, off);
      if (n < 0) throw new Error("write() failed: connection closed");
      off += n;
      if (
        off < buf.length &&
        !waitFd(this.fd, POLLOUT, Math.max(1, Math.ceil(deadline - performance.now())))
      ) {
        throw new Error("write() timed out");
      }
    }
  }

  /** Reads at least `min` bytes into `buf`, waiting (poll); throws on close or after `timeoutMs`. */
  readAtLeast(buf: Uint8Array, min: number, timeoutMs = 10_000): number {
    const deadline = performance.now() + timeoutMs;
    let got = 0;
    while (got < min) {
      const n = this.readSome(buf, got);
      if (n < 0) throw new Error("Connection closed by the server");
      got += n;
      if (
        got < min && !waitFd(this.fd, POLLIN, Math.max(1, Math.ceil(deadline - performance.now())))
      ) {
        throw new Error("read() timed out");
      }
    }
    return got;
  }

  close(): void {
    C.close(this.fd);
  }
}

/** One epoll instance: sockets registered with an index, `wait` fills the ready list. */
export class Poller {
  readonly #epfd: number;
  readonly #events: Uint8Array;
  readonly #view: DataView;
  readonly #ev = new Uint8Array(16);
  /** Index and event bits of the sockets the last {@link wait} returned. */
  readonly readyIndex: Int32Array;
  readonly readyEvents: Uint32Array;

  constructor(maxEvents = 256) {
    this.#epfd = C.epoll_create1(0);
    if (this.#epfd < 0) throw new Error(`epoll_create1() failed: errno ${errno()}`);
    this.#events = new Uint8Array(maxEvents * EV_SIZE);
    this.#view = new DataView(this.#events.buffer);
    this.readyIndex = new Int32Array(maxEvents);
    this.readyEvents = new Uint32Array(maxEvents);
  }

  #ctl(op: number, s: RawSocket, index: number, events: number): void {
    const v = new DataView(this.#ev.buffer);
    v.setUint32(0, events, true);
    v.setUint32(EV_DATA, index, true);
    if (C.epoll_ctl(this.#epfd, op, s.fd, this.#ev) < 0) {
      throw new Error(`epoll_ctl() failed: errno ${errno()}`);
    }
  }

  /** Watches `s` for `events`, reported with `index`. */
  add(s: RawSocket, index: number, events = EPOLLIN): void {
    this.#ctl(EPOLL_CTL_ADD, s, index, events);
  }

  /** Changes what `s` is watched for. */
  modify(s: RawSocket, index: number, events: number): void {
    this.#ctl(EPOLL_CTL_MOD, s, index, events);
  }

  #lastReady = 0;

  /**
   * Like {@link wait}, but after a wait that found work it first sleeps `coalesceUs`, so the
   * next wake collects what arrived meanwhile on every socket (Mosquitto writes each PUBACK on
   * its own: woken per PUBACK, the client would pay a wake, a read and a write per message).
   * With nothing ready after the sleep it blocks up to `timeoutMs` as usual. Adds at most
   * `coalesceUs` (plus the kernel's timer slack, ~50 µs) to what the client observes.
   */
  waitCoalesced(coalesceUs: number, timeoutMs: number): number {
    let n = 0;
    if (coalesceUs > 0 && this.#lastReady > 0) {
      C.usleep(coalesceUs);
      n = this.wait(0);
    }
    if (n === 0) n = this.wait(timeoutMs);
    this.#lastReady = n;
    return n;
  }

  /** Waits up to `timeoutMs` for ready sockets; returns how many (see readyIndex/readyEvents). */
  wait(timeoutMs: number): number {
    return this.#ready(C.epoll_wait(this.#epfd, this.#events, this.readyIndex.length, timeoutMs));
  }

  readonly #timespec = new BigInt64Array(2);
  readonly #timespecBytes = new Uint8Array(this.#timespec.buffer);

  /**
   * {@link wait} with a timeout in microseconds: a sender paced to a schedule wakes on time
   * without a busy loop, and a socket that becomes ready ends the wait at once as with
   * {@link wait}. Rounded up to whole milliseconds where the libc has no `epoll_pwait2`.
   */
  waitUs(timeoutUs: number): number {
    const us = Math.max(0, Math.ceil(timeoutUs));
    if (C.epoll_pwait2 === null) return this.wait(Math.ceil(us / 1000));
    this.#timespec[0] = BigInt(Math.floor(us / 1_000_000));
    this.#timespec[1] = BigInt((us % 1_000_000) * 1000);
    const max = this.readyIndex.length;
    return this.#ready(C.epoll_pwait2(this.#epfd, this.#events, max, this.#timespecBytes, null));
  }

  #ready(n: number): number {
    for (let i = 0; i < n; i++) {
      this.readyEvents[i] = this.#view.getUint32(i * EV_SIZE, true);
      this.readyIndex[i] = this.#view.getUint32(i * EV_SIZE + EV_DATA, true);
    }
    return n < 0 ? 0 : n;
  }

  close(): void {
    C.close(this.#epfd);
  }
}

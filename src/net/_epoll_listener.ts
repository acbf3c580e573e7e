/**
 * A plain-TCP MQTT listener of the epoll layer: a non-blocking listening socket in the
 * process's epoll set, accepting until the kernel has no more, each accepted socket handed on
 * as an {@link EpollSocket} with its peer address (for `limits.max_connections` and the
 * per-source rate, which the gateway applies to every transport alike).
 *
 * Out of descriptors (EMFILE/ENFILE), a level-triggered listener would be reported at every
 * wake with the same connection still waiting: the spin node:net avoids by accident. Here one
 * spare descriptor is kept; at EMFILE it is given up to accept the waiting connection and close
 * it at once (counted), then taken back, so the backlog drains and the loop does not spin.
 *
 * @module
 */
import { type EpollHandler, type EpollLoop, epollLoop } from "./_epoll_loop.ts";
import { EpollSocket } from "./_epoll_socket.ts";
import {
  addressOf,
  AF_INET,
  AF_INET6,
  EAGAIN,
  EINTR,
  EMFILE,
  ENFILE,
  ENOBUFS,
  ENOMEM,
  EPOLLIN,
  errno,
  IPPROTO_IPV6,
  IPPROTO_TCP,
  IPV6_V6ONLY,
  type Libc,
  parseIp,
  portOf,
  SO_REUSEADDR,
  SOCK_CLOEXEC,
  SOCK_NONBLOCK,
  SOCK_STREAM,
  sockaddrOf,
  SOL_SOCKET,
  sysError,
  TCP_NODELAY,
} from "./_libc.ts";

/** Connections accepted per wake before the other sockets get their turn. */
const MAX_ACCEPTS_PER_WAKE = 256;
/** Pause after an accept failure that is not a lack of descriptors (ENOBUFS, ENOMEM). */
const ACCEPT_RETRY_MS = 100;
const BACKLOG = 1024;
/** Peer address strings kept for reuse (devices behind one NAT share one string). */
const MAX_NAMES = 4096;

/** Called for each accepted socket, and for each connection shed for want of descriptors. */
export interface EpollAcceptHooks {
  accept(t: EpollSocket): void;
  /** A connection was closed at once: the process is out of file descriptors. */
  shed(): void;
}

/** A bound epoll listener. */
export class EpollListener implements EpollHandler {
  readonly port: number;
  readonly #loop: EpollLoop;
  readonly #libc: Libc;
  readonly #fd: number;
  readonly #id: number;
  readonly #hooks: EpollAcceptHooks;
  readonly #addr = new Uint8Array(128);
  readonly #addrLen = new Uint32Array(1);
  readonly #addrLenBytes = new Uint8Array(this.#addrLen.buffer);
  readonly #one = new Uint8Array(new Int32Array([1]).buffer);
  /** IPv4 peer (as a number) → its address string: one string, not one per connection. */
  readonly #names = new Map<number, string>();
  #spare: number;
  #closed = false;
  #retry: ReturnType<typeof setTimeout> | undefined;

  /** Binds `ip:port` (from parseIp); throws an Error with a node-style code when it cannot. */
  constructor(libc: Libc, ip: Uint8Array, port: number, hooks: EpollAcceptHooks) {
    this.#libc = libc;
    this.#loop = epollLoop(libc);
    this.#hooks = hooks;
    this.#fd = bindSocket(libc, ip, port);
    this.port = boundPort(libc, this.#fd);
    this.#spare = libc.socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    this.#id = this.#loop.nextId();
    this.#loop.add(this.#fd, this.#id, EPOLLIN, this);
  }

  /** Stops accepting; accepted sockets stay open. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#retry);
    this.#loop.remove(this.#fd, this.#id);
    this.#libc.close(this.#fd);
    if (this.#spare >= 0) this.#libc.close(this.#spare);
  }

  onEvents(): void {
    for (let i = 0; i < MAX_ACCEPTS_PER_WAKE && !this.#closed; i++) {
      const fd = this.#accept();
      if (fd >= 0) {
        this.#accepted(fd);
        continue;
      }
      const e = -fd;
      if (e === EAGAIN) return;
      if (e === EINTR) continue;
      if (e === EMFILE || e === ENFILE) {
        if (!this.#shed()) return this.#pause();
        continue;
      }
      if (e === ENOBUFS || e === ENOMEM) return this.#pause();
      // ECONNABORTED, EPROTO and the like: that one connection is gone; take the next.
    }
  }

  /** One accept4: the socket's fd, or -errno. */
  #accept(): number {
    this.#addrLen[0] = this.#addr.length;
    const flags = SOCK_NONBLOCK | SOCK_CLOEXEC;
    const fd = this.#libc.accept4(this.#fd, this.#addr, this.#addrLenBytes, flags);
    return fd >= 0 ? fd : -errno(this.#libc);
  }

  #accepted(fd: number): void {
    const libc = this.#libc;
    libc.setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, this.#one, 4);
    const socket = new EpollSocket(this.#loop, fd, this.#peerName());
    try {
      this.#hooks.accept(socket);
    } catch (err) {
      socket.close();
      throw err;
    }
  }

  /** The accepted peer's address; IPv4 ones (also as ::ffff:a.b.c.d) from {@link #names}. */
  #peerName(): string {
    const a = this.#addr;
    const family = a[0] | (a[1] << 8);
    const mapped = family === AF_INET6 && a[18] === 0xff && a[19] === 0xff &&
      a.subarray(8, 18).every((x) => x === 0);
    if (family !== AF_INET && !mapped) return addressOf(a);
    const at = mapped ? 20 : 4;
    const key = ((a[at] << 24) | (a[at + 1] << 16) | (a[at + 2] << 8) | a[at + 3]) >>> 0;
    let name = this.#names.get(key);
    if (name === undefined) {
      if (this.#names.size >= MAX_NAMES) this.#names.clear();
      name = addressOf(a);
      this.#names.set(key, name);
    }
    return name;
  }

  /** Accepts and closes the waiting connection on the spare descriptor; false: no spare. */
  #shed(): boolean {
    const libc = this.#libc;
    if (this.#spare < 0) return false;
    libc.close(this.#spare);
    const fd = this.#accept();
    if (fd >= 0) libc.close(fd);
    this.#spare = libc.socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) this.#hooks.shed();
    return fd >= 0;
  }

  /** Stops watching for a while (the failure would be reported again at once). */
  #pause(): void {
    if (this.#retry !== undefined || this.#closed) return;
    this.#loop.modify(this.#fd, this.#id, 0);
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      if (this.#closed) return;
      if (this.#spare < 0) this.#spare = this.#libc.socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      this.#loop.modify(this.#fd, this.#id, EPOLLIN);
    }, ACCEPT_RETRY_MS);
  }
}

/** A non-blocking listening socket on `ip:port` (dual-stack when `ip` is `::`). */
function bindSocket(libc: Libc, ip: Uint8Array, port: number): number {
  const family = sockaddrOf(ip, port);
  const fd = libc.socket(family[0], SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw sysError("socket", errno(libc));
  const one = new Uint8Array(new Int32Array([1]).buffer);
  const zero = new Uint8Array(4);
  libc.setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, one, 4);
  if (ip.length === 16) libc.setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, zero, 4);
  if (libc.bind(fd, family, family.length) < 0 || libc.listen(fd, BACKLOG) < 0) {
    const err = sysError("bind", errno(libc));
    libc.close(fd);
    throw err;
  }
  return fd;
}

function boundPort(libc: Libc, fd: number): number {
  const sa = new Uint8Array(128);
  const len = new Uint32Array([sa.length]);
  libc.getsockname(fd, sa, new Uint8Array(len.buffer));
  return portOf(sa);
}

/** The IP to bind for a configured host: an IP literal, or `localhost`; null otherwise. */
export function bindableIp(hostname: string): Uint8Array | null {
  const host = hostname.startsWith("[") && hostname.endsWith("]")
    ? hostname.slice(1, -1)
    : hostname;
  return parseIp(host === "localhost" ? "127.0.0.1" : host);
}

/**
 * The libc calls of the epoll socket layer (Deno FFI), their constants, and the socket
 * address codec. Linux only, with FFI granted (`listeners.ts` asks both before it loads the
 * layer); `openLibc` says why not when libc.so.6 cannot be opened, so the caller can fall back
 * to node:net.
 *
 * @module
 */
import { formatIp } from "../base/ip.ts";

export { parseIp } from "../base/ip.ts";

const SYMBOLS = {
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  bind: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  listen: { parameters: ["i32", "i32"], result: "i32" },
  accept4: { parameters: ["i32", "buffer", "buffer", "i32"], result: "i32" },
  setsockopt: { parameters: ["i32", "i32", "i32", "buffer", "u32"], result: "i32" },
  getsockname: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  read: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  send: { parameters: ["i32", "buffer", "usize", "i32"], result: "isize" },
  write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  close: { parameters: ["i32"], result: "i32" },
  eventfd: { parameters: ["u32", "i32"], result: "i32" },
  epoll_create1: { parameters: ["i32"], result: "i32" },
  epoll_ctl: { parameters: ["i32", "i32", "i32", "buffer"], result: "i32" },
  // On Deno's blocking thread pool: the JS thread never blocks, one promise per wake.
  epoll_wait: { parameters: ["i32", "buffer", "i32", "i32"], result: "i32", nonblocking: true },
  __errno_location: { parameters: [], result: "pointer" },
} as const;

/** The bound libc functions. */
export type Libc = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

export const AF_INET = 2;
export const AF_INET6 = 10;
export const SOCK_STREAM = 1;
export const SOCK_NONBLOCK = 0o4000;
export const SOCK_CLOEXEC = 0o2000000;
export const SOL_SOCKET = 1;
export const SO_REUSEADDR = 2;
export const IPPROTO_TCP = 6;
export const TCP_NODELAY = 1;
export const IPPROTO_IPV6 = 41;
export const IPV6_V6ONLY = 26;
export const MSG_NOSIGNAL = 0x4000;
export const EINTR = 4;
export const EAGAIN = 11;
export const EMFILE = 24;
export const ENFILE = 23;
export const ENOBUFS = 105;
export const ENOMEM = 12;
export const EPOLLIN = 0x1;
export const EPOLLOUT = 0x4;
export const EPOLLERR = 0x8;
export const EPOLLHUP = 0x10;
/** The peer shut its side down (a FIN came): what is left to read ends in end of stream. */
export const EPOLLRDHUP = 0x2000;
/** Edge-triggered: reported when readiness arrives, not while it lasts (`epoll(7)`). */
export const EPOLLET = 0x8000_0000;
export const EPOLL_CTL_ADD = 1;
export const EPOLL_CTL_DEL = 2;
export const EPOLL_CTL_MOD = 3;
/** `struct epoll_event` is packed (12 bytes) on x86_64, naturally aligned (16) elsewhere. */
export const EV_SIZE = Deno.build.arch === "x86_64" ? 12 : 16;
export const EV_DATA = Deno.build.arch === "x86_64" ? 4 : 8;

/** errno names the callers turn into node-style error codes (bind errors, resets). */
const ERRNO_NAMES: Record<number, string> = {
  1: "EPERM",
  13: "EACCES",
  22: "EINVAL",
  24: "EMFILE",
  32: "EPIPE",
  98: "EADDRINUSE",
  99: "EADDRNOTAVAIL",
  104: "ECONNRESET",
  110: "ETIMEDOUT",
};

let cached: { libc: Libc } | { reason: string } | undefined;

/**
 * libc, or why it cannot be opened; opened once per process. The caller has made sure first that
 * this is Linux and FFI is granted (`listeners.ts`), so that no permission prompt is asked.
 */
export function openLibc(): { libc: Libc } | { reason: string } {
  if (cached !== undefined) return cached;
  try {
    return cached = { libc: Deno.dlopen("libc.so.6", SYMBOLS).symbols };
  } catch (err) {
    return cached = { reason: `libc.so.6 cannot be opened (${(err as Error).message})` };
  }
}

/** The JS thread's errno cell (thread-local, so fixed for this thread: made once). */
let errnoCell: Deno.UnsafePointerView | null = null;

/** The JS thread's errno, right after a failed call (sync FFI calls run on this thread). */
export function errno(libc: Libc): number {
  if (errnoCell === null) {
    const p = libc.__errno_location();
    if (p === null) return 0;
    errnoCell = new Deno.UnsafePointerView(p);
  }
  return errnoCell.getInt32();
}

/** An Error for a failed `call`, with the node-style `code` (`EADDRINUSE`, `ECONNRESET`). */
export function sysError(call: string, e: number): Error & { code: string } {
  const code = ERRNO_NAMES[e] ?? `errno ${e}`;
  return Object.assign(new Error(`${call}: ${code}`), { code, errno: e });
}

/** A `sockaddr_in`/`sockaddr_in6` for `ip` (from {@link parseIp}) and `port`. */
export function sockaddrOf(ip: Uint8Array, port: number): Uint8Array {
  const sa = new Uint8Array(ip.length === 4 ? 16 : 28);
  const v = new DataView(sa.buffer);
  v.setUint16(0, ip.length === 4 ? AF_INET : AF_INET6, true);
  v.setUint16(2, port, false);
  sa.set(ip, ip.length === 4 ? 4 : 8);
  return sa;
}

/** The port of a `sockaddr_in`/`sockaddr_in6`. */
export function portOf(sa: Uint8Array): number {
  return (sa[2] << 8) | sa[3];
}

/**
 * The address of a `sockaddr_in`/`sockaddr_in6` as node:net prints it, except that an IPv4
 * peer of a dual-stack socket (`::ffff:10.0.0.1`) is `10.0.0.1`, as the node layer makes it.
 */
export function addressOf(sa: Uint8Array): string {
  const family = sa[0] | (sa[1] << 8);
  if (family === AF_INET) return formatIp(sa.subarray(4, 8));
  return family === AF_INET6 ? formatIp(sa.subarray(8, 24)) : "";
}

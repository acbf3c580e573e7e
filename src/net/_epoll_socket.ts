/**
 * An accepted TCP socket of the epoll layer as a push {@link Transport}. What one idle
 * connection costs here is this object and its map entry: the socket's buffers are kernel
 * memory, not process RSS, and reads go through one buffer shared by every socket.
 *
 * Writes go to the kernel at once; what it does not take waits in order (EPOLLOUT) and the
 * write's promise resolves only when all of its bytes are out, as a node:net write callback
 * does, so the outbox's back-pressure is unchanged.
 *
 * @module
 */
import type { Transport, TransportSink } from "../session/transport.ts";
import type { EpollHandler, EpollLoop } from "./_epoll_loop.ts";
import {
  EAGAIN,
  EINTR,
  EPOLLERR,
  EPOLLHUP,
  EPOLLIN,
  EPOLLOUT,
  errno,
  MSG_NOSIGNAL,
  sysError,
} from "./_libc.ts";

/** Every socket reads into this (the sink copies what it keeps: {@link TransportSink.data}). */
const READ_BUFFER = new Uint8Array(64 * 1024);
const READ_LENGTH = BigInt(READ_BUFFER.length);
/** Reads per socket per wake, so one fast sender cannot starve the others (level-triggered). */
const MAX_READS_PER_WAKE = 8;

/** Bytes a write still has to hand to the kernel. */
interface PendingWrite {
  readonly bytes: Uint8Array;
  offset: number;
  readonly resolve: (n: number) => void;
  readonly reject: (err: unknown) => void;
}

/** One accepted socket. */
export class EpollSocket implements Transport, EpollHandler {
  readonly remoteAddress: string;
  readonly #loop: EpollLoop;
  readonly #fd: number;
  readonly #id: number;
  #sink: TransportSink | null = null;
  #paused = false;
  #closed = false;
  /** End of stream or a read error was handed to the sink (nothing more is read). */
  #ended = false;
  /** What epoll watches now (0: not registered). */
  #interest = 0;
  #writes: PendingWrite[] | null = null;

  constructor(loop: EpollLoop, fd: number, remoteAddress: string) {
    this.#loop = loop;
    this.#fd = fd;
    this.#id = loop.nextId();
    this.remoteAddress = remoteAddress;
  }

  start(sink: TransportSink): void {
    if (this.#sink !== null || this.#closed) return;
    this.#sink = sink;
    this.#watch();
  }

  pause(): void {
    this.#paused = true;
    this.#watch();
  }

  resume(): void {
    this.#paused = false;
    this.#watch();
  }

  write(bytes: Uint8Array): Promise<number> {
    if (this.#closed) return Promise.reject(sysError("write", 32));
    let offset = 0;
    if (this.#writes === null) {
      const n = this.#send(bytes, 0);
      if (n < 0) return Promise.reject(this.#broken(sysError("write", -n)));
      if (n === bytes.length) return Promise.resolve(n);
      offset = n;
    }
    return new Promise((resolve, reject) => {
      (this.#writes ??= []).push({ bytes, offset, resolve, reject });
      this.#watch();
    });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#loop.remove(this.#fd, this.#id);
    this.#interest = 0;
    this.#loop.libc.close(this.#fd);
    this.#failWrites(sysError("write", 32));
    // As node:net does ('close' after destroy()): the sink hears the end once, later.
    if (this.#sink !== null && !this.#ended) {
      this.#ended = true;
      const sink = this.#sink;
      queueMicrotask(() => sink.end());
    }
  }

  onEvents(events: number): void {
    if (this.#writes !== null && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) !== 0) {
      this.#flush();
    }
    if (this.#reading() && (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) !== 0) this.#read();
    this.#watch();
  }

  #reading(): boolean {
    return this.#sink !== null && !this.#paused && !this.#ended && !this.#closed;
  }

  /** Reads what has arrived, handing each read to the sink, until it would block. */
  #read(): void {
    const libc = this.#loop.libc;
    for (let i = 0; i < MAX_READS_PER_WAKE && this.#reading(); i++) {
      const n = Number(libc.read(this.#fd, READ_BUFFER, READ_LENGTH));
      if (n > 0) {
        this.#sink!.data(READ_BUFFER.subarray(0, n));
        if (n < READ_BUFFER.length) return; // drained (epoll reports the socket again if not)
        continue;
      }
      const e = n === 0 ? 0 : errno(libc);
      if (e === EAGAIN) return;
      if (e === EINTR) continue;
      this.#ended = true;
      this.#sink!.end(e === 0 ? undefined : sysError("read", e));
      return;
    }
  }

  /** Hands queued writes to the kernel, in order, resolving each one that is fully out. */
  #flush(): void {
    const writes = this.#writes!;
    while (writes.length > 0) {
      const w = writes[0];
      const n = this.#send(w.bytes, w.offset);
      if (n < 0) return this.#failWrites(this.#broken(sysError("write", -n)));
      w.offset += n;
      if (w.offset < w.bytes.length) return;
      writes.shift();
      w.resolve(w.bytes.length);
    }
    this.#writes = null;
  }

  /** One send from `offset`: bytes taken (0: would block), or -errno. */
  #send(bytes: Uint8Array, offset: number): number {
    const libc = this.#loop.libc;
    for (;;) {
      const view = offset === 0 ? bytes : bytes.subarray(offset);
      const n = Number(libc.send(this.#fd, view, BigInt(view.length), MSG_NOSIGNAL));
      if (n >= 0) return n;
      const e = errno(libc);
      if (e === EAGAIN) return 0;
      if (e !== EINTR) return -e;
    }
  }

  /**
   * A write failed (reset, broken pipe): the sink hears it as its end, as node:net's 'error'
   * event; the kernel reports a socket error once, so a later read would only see the end.
   */
  #broken(err: Error): Error {
    if (this.#sink !== null && !this.#ended) {
      this.#ended = true;
      const sink = this.#sink;
      queueMicrotask(() => sink.end(err));
    }
    return err;
  }

  #failWrites(err: Error): void {
    const writes = this.#writes;
    this.#writes = null;
    for (const w of writes ?? []) w.reject(err);
  }

  /**
   * Registers with epoll for what is wanted now, or not at all: a registered socket is always
   * told of a hang-up, which a paused socket would hear at every wake without acting on it.
   */
  #watch(): void {
    if (this.#closed) return;
    const want = (this.#reading() ? EPOLLIN : 0) | (this.#writes !== null ? EPOLLOUT : 0);
    if (want === this.#interest) return;
    const loop = this.#loop;
    if (want === 0) loop.remove(this.#fd, this.#id);
    else if (this.#interest === 0) loop.add(this.#fd, this.#id, want, this);
    else loop.modify(this.#fd, this.#id, want);
    this.#interest = want;
  }
}

/**
 * An accepted TCP socket of the epoll layer as a push {@link Transport}. What one idle
 * connection costs here is this object and its map entry: the socket's buffers are kernel
 * memory, not process RSS, and reads go through one buffer shared by every socket.
 *
 * Writes go to the kernel at once; what it does not take waits in order (EPOLLOUT) and the
 * write's promise resolves only when all of its bytes are out, as a node:net write callback
 * does, so the outbox's back-pressure is unchanged.
 *
 * The socket is registered once, edge-triggered, for reading and writing, and pausing is a
 * flag: no `epoll_ctl` per pause and resume. Under a QoS 0 flood every read pauses the
 * connection until its appends are confirmed, and the two `epoll_ctl` calls that took it out
 * of the set and back were a visible share of the gateway's CPU. So the socket remembers that bytes wait
 * (`#readable`: an event came, and no read since came back short or EAGAIN) and reads them on
 * resume; epoll reports it again only when more arrive.
 *
 * @module
 */
import type { Transport, TransportSink } from "../session/transport.ts";
import type { EpollHandler, EpollLoop } from "./_epoll_loop.ts";
import {
  EAGAIN,
  EINTR,
  EPOLLERR,
  EPOLLET,
  EPOLLHUP,
  EPOLLIN,
  EPOLLOUT,
  EPOLLRDHUP,
  errno,
  MSG_NOSIGNAL,
  sysError,
} from "./_libc.ts";

/** Every socket reads into this (the sink copies what it keeps: {@link TransportSink.data}). */
const READ_BUFFER = new Uint8Array(64 * 1024);
const READ_LENGTH = BigInt(READ_BUFFER.length);
/** Reads per socket per wake, so one fast sender cannot starve the others (then: `again`). */
const MAX_READS_PER_WAKE = 8;
/** What the socket is registered for, once, from start to close. */
const WATCHED = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
/** Events after which a read ends in end of stream or an error, however short the reads. */
const PEER_DONE = EPOLLRDHUP | EPOLLHUP | EPOLLERR;

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
  /** Registered with the loop (from start to close). */
  #registered = false;
  /** Bytes (or an end) may wait unread: epoll will not report them again by itself. */
  #readable = false;
  /**
   * The peer is done (FIN, reset): a short read no longer means "all read", since the end
   * of stream that follows is not a new edge if it came with the last bytes.
   */
  #peerDone = false;
  /** A read is queued (see `#queueRead`). */
  #readQueued = false;
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
    this.#register();
    this.#queueRead(); // if reported before the sink came (a write registered the socket)
  }

  /** Into the loop's set, once; what has already arrived is reported at once (as on ADD). */
  #register(): void {
    if (this.#registered || this.#closed) return;
    this.#loop.add(this.#fd, this.#id, WATCHED, this);
    this.#registered = true;
  }

  pause(): void {
    this.#paused = true;
  }

  resume(): void {
    this.#paused = false;
    this.#queueRead();
  }

  /**
   * Reads the bytes that wait, soon: not in this call, which comes from inside the sink's
   * own handling (resume) or before the caller is ready for data (start).
   */
  #queueRead(): void {
    if (this.#readable && !this.#readQueued && this.#reading()) {
      this.#readQueued = true;
      // A closure per queued read, not a bound function per socket (memory per idle socket).
      queueMicrotask(() => this.#queuedRead());
    }
  }

  #queuedRead(): void {
    this.#readQueued = false;
    if (this.#readable && this.#reading()) this.#read();
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
    // The rest goes out on EPOLLOUT, reported once the kernel has room again.
    this.#register();
    return new Promise((resolve, reject) => {
      (this.#writes ??= []).push({ bytes, offset, resolve, reject });
    });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#registered) this.#loop.remove(this.#fd, this.#id);
    this.#registered = false;
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
    if (this.#closed) return;
    if ((events & (EPOLLIN | PEER_DONE)) !== 0) this.#readable = true;
    if ((events & PEER_DONE) !== 0) this.#peerDone = true;
    if (this.#writes !== null && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) !== 0) {
      this.#flush();
    }
    if (this.#readable && this.#reading()) this.#read();
  }

  #reading(): boolean {
    return this.#sink !== null && !this.#paused && !this.#ended && !this.#closed;
  }

  /**
   * Reads what has arrived, handing each read to the sink, until it would block, the sink
   * pauses (`#readable` stays set: resume reads on) or this wake's share is used (`again`).
   */
  #read(): void {
    const libc = this.#loop.libc;
    for (let i = 0; i < MAX_READS_PER_WAKE; i++) {
      if (!this.#reading()) return;
      const n = Number(libc.read(this.#fd, READ_BUFFER, READ_LENGTH));
      if (n > 0) {
        // A short read took all there was: what arrives later is a new edge, reported. Not
        // so after a FIN or reset: their end is read next (0 or an error), then nothing.
        if (n < READ_BUFFER.length && !this.#peerDone) this.#readable = false;
        this.#sink!.data(READ_BUFFER.subarray(0, n));
        if (!this.#readable) return;
        continue;
      }
      const e = n === 0 ? 0 : errno(libc);
      if (e === EINTR) continue;
      this.#readable = false;
      if (e === EAGAIN) return;
      this.#ended = true;
      this.#sink!.end(e === 0 ? undefined : sysError("read", e));
      return;
    }
    if (this.#reading()) this.#loop.again(this); // bytes left: after the other sockets' turn
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
}

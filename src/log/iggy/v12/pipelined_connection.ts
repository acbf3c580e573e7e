/**
 * One connection speaking protocol 0.12: every request after Register takes a fresh request id,
 * up to {@link MAX_PENDING_PER_CONNECTION} are in flight at once, and replies
 * are matched to them by the echoed id, in any order. Transient refusals (57, 58) resend the
 * identical frame with back-off; an eviction fails everything on the connection. A request
 * that times out fails alone while the server still answers others; when nothing at all came
 * back within the timeout the connection is taken for dead and closed.
 *
 * @module
 */

import {
  classOf,
  FrameKind,
  IggyConnectionError,
  IggyError,
  IggyEvictionError,
  IggyTimeoutError,
  operationFor,
  Status,
} from "../codes.ts";
import { NotSentError } from "../codes.ts";
import type { Transport } from "../dial.ts";
import { readFrameKind, readReplyHeader } from "../header_layout.ts";
import { type Credentials, decodeRegisterReply, type RegisterReply } from "../login.ts";
import { commandName, decodeReply } from "../reply.ts";
import { randomMessageId } from "../batch.ts";
import { FrameReader } from "../frame_reader.ts";
import { FrameWriter } from "../frame_writer.ts";
import { randomRequestChecksum, requestFrame012, type RouteContext } from "./routed_header.ts";
import { bindSessionBody, encodeRegister012, newBindSecret, registerChecksum } from "./register.ts";
import { Code012, MAX_PENDING_PER_CONNECTION, PROTOCOL_012_PACKED } from "./wire.ts";

/** Byte of a reply header naming the replica that sent it. */
const REPLICA_AT = 61;

/** First pause before resending a transiently refused request; doubles per attempt. */
export const TRANSIENT_BACKOFF_MS = 20;
const TRANSIENT_BACKOFF_MAX_MS = 500;

type Frame = { header: Uint8Array; body: Uint8Array };

interface Pending {
  resolve(f: Frame): void;
  reject(e: Error): void;
}

/** Per-request choices of a 0.12 request. */
export interface RequestOptions012 {
  /** Partition context to stamp (partition ops, polls, offsets). */
  readonly context?: RouteContext;
  /** Longer timeout for a deferred poll (its wait + a margin). */
  readonly timeoutMs?: number;
  /**
   * Called once the frame was written with a function that cancels it: for a deferred poll
   * it sends CANCEL (108) and fails the request with {@link DeferredCancelledError}.
   */
  readonly onSent?: (cancel: () => void) => void;
  /** Replica id of the node the request must go to (the partition's primary). */
  readonly node?: number;
}

/** One logical 0.12 session: what a further connection needs to bind to it. */
export interface SessionState012 {
  readonly client: bigint;
  readonly session: bigint;
  /** Never logged. */
  readonly secret: Uint8Array;
  /** Next request id of the session (gaps allowed, never reused). */
  nextId: bigint;
  readonly reply: RegisterReply;
}

/** A deferred poll this client cancelled. */
export class DeferredCancelledError extends Error {
  constructor() {
    super("Deferred poll cancelled");
    this.name = "DeferredCancelledError";
  }
}

/** Options of a 0.12 connection. */
export interface ConnectionOptions012 {
  readonly timeoutMs: number;
  readonly label: string;
  /** Packed protocol version to register with (default 0.12.2). */
  readonly protocolVersion?: number;
  /** In-flight bound (default 256, the server's per-connection window). */
  readonly maxPending?: number;
}

/** A registered 0.12 connection. */
export class IggyConnection012 {
  /** Wire dialect of this connection. */
  readonly dialect = "0.12";
  readonly #transport: Transport;
  readonly #writer: FrameWriter;
  readonly #o: Required<ConnectionOptions012>;
  #client = 0n;
  #session = 0n;
  /** The logical session, shared by every connection bound to it (one request-id counter). */
  #shared: SessionState012 | undefined;
  readonly #pending = new Map<bigint, Pending>();
  readonly #slots: (() => void)[] = [];
  #inFlight = 0;
  /** Settles when the last unbound request queued so far has finished. */
  #unboundTail: Promise<void> = Promise.resolve();
  #queued = 0;
  #closedWith: Error | undefined;
  #onClose: (e: Error) => void = () => {};
  #lastReceived = performance.now();
  readonly #reading: Promise<void>;
  /** Resolves (never rejects) with the reason once the connection is dead. */
  readonly closed: Promise<Error>;
  /** `performance.now()` of the last request sent (monotonic: a clock step moves no timeout). */
  lastUsed = performance.now();
  /** What Register answered, once registered. */
  registration: RegisterReply | undefined;
  /** Replica id of the node, from the `replica` byte (61) of its replies. */
  replica: number | undefined;

  constructor(transport: Transport, options: ConnectionOptions012) {
    this.#transport = transport;
    this.#writer = new FrameWriter(transport);
    this.#o = {
      ...options,
      protocolVersion: options.protocolVersion ?? PROTOCOL_012_PACKED,
      maxPending: Math.max(1, options.maxPending ?? MAX_PENDING_PER_CONNECTION),
    };
    this.closed = new Promise((resolve) => (this.#onClose = resolve));
    const reader = new FrameReader(transport, (f) => this.#deliver(f), this.#o.label);
    this.#reading = reader.run().then(
      () => this.#fail(new IggyConnectionError(`Iggy closed the connection ${this.#o.label}`)),
      (e) => this.#fail(e as Error),
    );
  }

  get isClosed(): boolean {
    return this.#closedWith !== undefined;
  }
  /** Requests waiting or in flight. */
  get load(): number {
    return this.#queued;
  }
  /** The bound session (0 before Register). */
  get session(): bigint {
    return this.#session;
  }

  /** The logical session this connection registered or bound, once logged in. */
  get sessionState(): SessionState012 | undefined {
    return this.#shared;
  }

  /** Logs in: Register with a fresh client id and bind secret. */
  async register(credentials: Credentials): Promise<RegisterReply> {
    const secret = newBindSecret();
    const { code, body } = encodeRegister012(credentials, secret, this.#o.protocolVersion);
    this.#client = randomMessageId();
    const frame = requestFrame012(code, body, {
      client: this.#client,
      request: 0n,
      session: 0n,
      operation: operationFor(code),
      requestChecksum: registerChecksum(body),
    });
    const reply = decodeRegisterReply(await this.#exchange(code, 0n, frame, this.#o.timeoutMs));
    if (reply.session === 0n) throw new IggyError(Status.UNAUTHENTICATED, "Iggy bound no session");
    this.#session = reply.session;
    this.registration = reply;
    this.#shared = { client: this.#client, session: reply.session, secret, nextId: 1n, reply };
    return reply;
  }

  /**
   * Attaches this connection to a session another connection registered (BindSession, 15),
   * saving a login; its requests then draw ids from that session's one counter.
   */
  async bind(s: SessionState012): Promise<RegisterReply> {
    this.#client = s.client;
    const request = s.nextId++;
    const body = bindSessionBody(this.#o.protocolVersion, s.client, s.session, s.secret);
    const frame = requestFrame012(Code012.BIND_SESSION, body, {
      client: s.client,
      request,
      session: s.session,
      operation: 2,
    });
    const reply = decodeRegisterReply(
      await this.#exchange(Code012.BIND_SESSION, request, frame, this.#o.timeoutMs),
    );
    if (reply.session !== s.session) {
      throw new IggyError(Status.UNAUTHENTICATED, "Iggy bound another session");
    }
    this.#session = s.session;
    this.registration = s.reply;
    this.#shared = s;
    return s.reply;
  }

  /** Sends one command on the session; resolves with its reply payload. */
  request(code: number, body?: Uint8Array, options?: RequestOptions012): Promise<Uint8Array> {
    return this.#request(code, body ?? new Uint8Array(0), false, options ?? {});
  }

  /** As {@link request}, `frame` holding HEADER_SIZE bytes of room in front of the body. */
  requestFramed(code: number, frame: Uint8Array, options?: RequestOptions012): Promise<Uint8Array> {
    return this.#request(code, frame, true, options ?? {});
  }

  /** Cancels a deferred poll sent as `request` (108: same connection, same id, no reply). */
  #cancel(request: bigint): void {
    const p = this.#pending.get(request);
    if (!p || this.#closedWith) return;
    this.#pending.delete(request);
    p.reject(new DeferredCancelledError());
    const frame = requestFrame012(Code012.CANCEL_DEFERRED_REQUEST, new Uint8Array(0), {
      client: this.#client,
      request,
      session: this.#session,
      operation: 2,
    });
    this.#writer.write(frame).catch(() => {});
  }

  async #request(
    code: number,
    body: Uint8Array,
    framed: boolean,
    o: RequestOptions012,
  ): Promise<Uint8Array> {
    const unbound = this.#session === 0n;
    if (unbound && code !== 1) {
      throw new NotSentError(`Iggy connection ${this.#o.label} is not logged in`);
    }
    const operation = operationFor(code);
    const kind = classOf(operation);
    // Unbound requests all carry id 0, which names one pending reply: one at a time.
    const turn = unbound ? this.#unboundTurn() : undefined;
    this.#queued++;
    try {
      await turn?.ready;
      await this.#slot();
      if (this.#closedWith) {
        throw new NotSentError(`Cannot ${commandName(code)}: ${this.#closedWith.message}`);
      }
      const request = unbound ? 0n : this.#shared!.nextId++;
      const frame = requestFrame012(code, body, {
        client: this.#client,
        request,
        session: this.#session,
        operation,
        requestChecksum: kind === "metadata" ? randomRequestChecksum() : 0n,
        context: o.context,
      }, framed);
      return await this.#exchange(code, request, frame, o.timeoutMs ?? this.#o.timeoutMs, o.onSent);
    } finally {
      this.#release();
      this.#queued--;
      turn?.done();
    }
  }

  /** A place in the line of unbound requests: `ready` when the one before it finished. */
  #unboundTurn(): { ready: Promise<void>; done: () => void } {
    const ready = this.#unboundTail;
    let done = () => {};
    this.#unboundTail = new Promise<void>((r) => (done = r));
    return { ready, done };
  }

  /** Writes `frame`, waits for its reply; resends the same frame on 57/58 with back-off. */
  async #exchange(
    code: number,
    request: bigint,
    frame: Uint8Array,
    timeoutMs: number,
    onSent?: (cancel: () => void) => void,
  ): Promise<Uint8Array> {
    const deadline = performance.now() + timeoutMs;
    for (
      let backoff = TRANSIENT_BACKOFF_MS;;
      backoff = Math.min(2 * backoff, TRANSIENT_BACKOFF_MAX_MS)
    ) {
      const reply = this.#await(code, request, deadline);
      // Awaited below; a timeout or #fail can reject it while the write is still pending, and
      // an unobserved rejection would end the process.
      reply.catch(() => {});
      this.lastUsed = performance.now();
      const written = this.#writer.write(frame).catch((e) =>
        this.#fail(
          new IggyConnectionError(`Iggy connection ${this.#o.label} failed writing: ${e}`, {
            cause: e,
          }),
        )
      );
      // A write that never completes (a stuck socket) must not outlive the request's deadline.
      await Promise.race([written, reply]);
      onSent?.(() => this.#cancel(request));
      const f = await reply;
      try {
        return decodeReply(f.header, f.body, code);
      } catch (e) {
        if (!isTransient(e) || performance.now() + backoff >= deadline) throw e;
      }
      await new Promise((r) => setTimeout(r, backoff));
      if (this.#closedWith) throw this.#closedWith;
    }
  }

  #await(code: number, request: bigint, deadline: number): Promise<Frame> {
    return new Promise<Frame>((resolve, reject) => {
      const waitMs = Math.max(0, deadline - performance.now());
      const timer = setTimeout(() => {
        this.#pending.delete(request);
        reject(
          new IggyTimeoutError(`Iggy did not answer ${commandName(code)} within ${waitMs} ms`),
        );
        // Nothing came back at all for as long: the connection is dead, not one request.
        // Less a millisecond: a timer may fire up to one before the fraction it was set for.
        const silentMs = performance.now() - this.#lastReceived;
        if (silentMs >= Math.min(waitMs, this.#o.timeoutMs) - 1) {
          this.#fail(new IggyTimeoutError(`Iggy connection ${this.#o.label} went silent`));
        }
      }, waitMs);
      this.#pending.set(request, {
        resolve: (f) => {
          clearTimeout(timer);
          resolve(f);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
    });
  }

  /** Waits for one of the in-flight slots (bounded by the server's window). */
  #slot(): Promise<void> {
    if (this.#inFlight < this.#o.maxPending) {
      this.#inFlight++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#slots.push(() => resolve()));
  }

  #release(): void {
    const next = this.#slots.shift();
    if (next) next(); // hand the slot over
    else this.#inFlight--;
  }

  #deliver(frame: Frame): void {
    this.#lastReceived = performance.now();
    this.replica = frame.header[REPLICA_AT];
    if (readFrameKind(frame.header) === FrameKind.EVICTION) {
      try {
        decodeReply(frame.header, frame.body, 0);
      } catch (e) {
        this.#fail(e as Error); // session-terminal: fails every request on the connection
      }
      return;
    }
    const id = readReplyHeader(frame.header).request;
    const p = this.#pending.get(id);
    if (!p) return; // a late reply to a request that timed out or was cancelled
    this.#pending.delete(id);
    p.resolve(frame);
  }

  #fail(e: Error): void {
    if (this.#closedWith) return;
    this.#closedWith = e;
    for (const p of this.#pending.values()) p.reject(e);
    this.#pending.clear();
    for (const wake of this.#slots.splice(0)) wake();
    try {
      this.#transport.close();
    } catch { /* already closed */ }
    this.#onClose(e);
  }

  /** Closes the connection; pending requests reject. Idempotent. */
  async close(): Promise<void> {
    this.#fail(new IggyConnectionError(`Iggy connection ${this.#o.label} closed by the gateway`));
    await this.#reading;
    await this.#writer.close().catch(() => {});
  }
}

/** 58 was never admitted; 57 has an unknown outcome, but resending the identical frame under the
 * same id is answered from the server's request dedup (and a producer batch is written once). */
function isTransient(e: unknown): boolean {
  return e instanceof IggyError && !(e instanceof IggyEvictionError) &&
    (e.code === Status.TRANSIENT_NOT_ACCEPTED || e.code === Status.TRANSIENT_NOT_COMMITTED);
}

/**
 * One connection to Iggy: frame reader, lockstep (one request in flight), request timeouts
 * (the server drops bad frames silently), the session and request-id rules of
 * Iggy's binary protocol 0.11 (Iggy server 0.9),
 * and eviction handling. A connection that timed out or was evicted is closed for good;
 * the pool opens a fresh one (and with it a fresh client id and session).
 *
 * @module
 */

import {
  classOf,
  IggyConnectionError,
  IggyError,
  IggyEvictionError,
  IggyTimeoutError,
  NotSentError,
  Status,
} from "../codes.ts";
import { FrameKind, operationFor } from "../codes.ts";
import type { Transport } from "../dial.ts";
import {
  HEADER_SIZE,
  readFrameKind,
  readReplyHeader,
  writeRequestHeader,
} from "../header_layout.ts";
import { FrameReader } from "../frame_reader.ts";
import { FrameWriter } from "../frame_writer.ts";
import {
  type Credentials,
  decodeRegisterReply,
  encodeRegister,
  type RegisterReply,
} from "../login.ts";
import { commandName, decodeReply } from "../reply.ts";
import { randomMessageId } from "../batch.ts";

export { MAX_FRAME_BYTES } from "../frame_reader.ts";

/** Pause before replaying a request the server answered with a transient code. */
export const TRANSIENT_RETRY_MS = 50;

/**
 * May a request answered with `e` be replayed with the same id on the same session?
 * 58 TransientNotAccepted: the server never admitted it, always safe. 57
 * TransientNotCommitted: outcome unknown; safe for reads, Register and metadata ops (the
 * server answers a replayed id from its cache) but not for partition ops, which have no
 * dedup: a replayed send could be stored twice, so it fails to the caller instead.
 */
export function isReplayable(e: unknown, kind: string): boolean {
  if (!(e instanceof IggyError) || e instanceof IggyEvictionError) return false;
  if (e.code === Status.TRANSIENT_NOT_ACCEPTED) return true;
  return e.code === Status.TRANSIENT_NOT_COMMITTED && kind !== "partition";
}

/** Request ids of one session. */
export class RequestIds {
  #counter = 1n;
  /** Id for an operation of `kind`: metadata advances the counter, the rest reuse it. */
  next(kind: "metadata" | "partition" | "read"): bigint {
    if (kind !== "metadata") return this.#counter;
    const id = this.#counter;
    this.#counter += 1n;
    return id;
  }
}

type Frame = { header: Uint8Array; body: Uint8Array };

/**
 * Why a reply is not the one to the request waiting (its request id, which Iggy echoes; not its
 * operation, which a metadata reply gives as the commit's, e.g. 64 for a create-topic of 132),
 * or null when it is (or is an eviction, which answers any request).
 */
export function strayReply(header: Uint8Array, request: bigint): string | null {
  if (readFrameKind(header) !== FrameKind.REPLY) return null;
  const got = readReplyHeader(header).request;
  return got === request ? null : `a reply to request ${got} came while request ${request} waited`;
}

/** One registered connection. */
export class IggyConnection {
  readonly #transport: Transport;
  readonly #writer: FrameWriter;
  readonly #timeoutMs: number;
  readonly #label: string;
  #client = 0n;
  #session = 0n;
  #ids = new RequestIds();
  #chain: Promise<unknown> = Promise.resolve();
  #waiter: { resolve(f: Frame): void; reject(e: Error): void } | undefined;
  /** When the waiting request times out, and its command (see `#onWatchdog`). */
  #deadline = 0;
  #waitingFor = 0;
  #watchdog: ReturnType<typeof setTimeout> | undefined;
  #closedWith: Error | undefined;
  #onClose: (e: Error) => void = () => {};
  #queued = 0;
  #wakePause: (() => void) | undefined;
  #reading: Promise<void>;
  /** Resolves (never rejects) with the reason once the connection is dead. */
  readonly closed: Promise<Error>;
  /** `performance.now()` of the last request sent (monotonic: a clock step moves no timeout). */
  lastUsed = performance.now();
  /** What Register answered, once registered. */
  registration: RegisterReply | undefined;

  constructor(transport: Transport, options: { timeoutMs: number; label: string }) {
    this.#transport = transport;
    this.#writer = new FrameWriter(transport);
    this.#timeoutMs = options.timeoutMs;
    this.#label = options.label;
    this.closed = new Promise((resolve) => (this.#onClose = resolve));
    this.#reading = this.#readLoop();
  }

  /** True once closed (by us, the peer, a timeout or an eviction). */
  get isClosed(): boolean {
    return this.#closedWith !== undefined;
  }
  /** Requests waiting or in flight. */
  get load(): number {
    return this.#queued;
  }

  /** Logs in (Register). Rejects with the eviction error on bad credentials. */
  async register(credentials: Credentials): Promise<RegisterReply> {
    const { code, body } = encodeRegister(credentials);
    this.#client = randomMessageId(); // fresh non-zero u128 per Register
    const reply = decodeRegisterReply(await this.#send(code, body, "register", false));
    if (reply.session === 0n) throw new IggyError(Status.UNAUTHENTICATED, "Iggy bound no session");
    this.#session = reply.session;
    this.#ids = new RequestIds();
    this.registration = reply;
    return reply;
  }

  /** Sends a command on the registered session and resolves with its reply payload. */
  request(code: number, body: Uint8Array = new Uint8Array(0)): Promise<Uint8Array> {
    return this.requestFramed(code, body, false);
  }

  /**
   * As {@link request}; with `framed`, `body` is the whole frame: its first HEADER_SIZE bytes
   * are room for the request header, written there in place (no copy of a large batch).
   */
  requestFramed(code: number, body: Uint8Array, framed = true): Promise<Uint8Array> {
    if (this.#session === 0n && code !== 1) {
      return Promise.reject(new NotSentError(`Iggy connection ${this.#label} is not logged in`));
    }
    const kind = classOf(operationFor(code));
    return this.#send(code, body, kind === "register" ? "read" : kind, framed);
  }

  #send(code: number, body: Uint8Array, kind: string, framed: boolean): Promise<Uint8Array> {
    this.#queued++;
    const run = async (): Promise<Uint8Array> => {
      if (this.#closedWith) {
        throw new NotSentError(`Cannot ${commandName(code)}: ${this.#closedWith.message}`);
      }
      const operation = operationFor(code);
      const request = kind === "register" ? 0n : this.#ids.next(kind as "read");
      const bodyLength = framed ? body.length - HEADER_SIZE : body.length;
      let frame = body;
      if (!framed) {
        frame = new Uint8Array(HEADER_SIZE + body.length);
        frame.set(body, HEADER_SIZE);
      }
      // In place: the room in front of the body is the encoder's, still zero (or a header
      // this wrote for the same command before a replay).
      writeRequestHeader({
        bodyLength,
        client: this.#client,
        request,
        operation,
        session: kind === "register" ? 0n : this.#session,
        code: operation === 2 ? code : undefined,
      }, frame);
      const started = performance.now();
      for (;;) {
        const reply = this.#nextFrame(code);
        this.lastUsed = performance.now();
        const written = this.#writer.write(frame).catch((e) => {
          this.#fail(
            new IggyConnectionError(`Iggy connection ${this.#label} failed writing: ${e}`, {
              cause: e,
            }),
          );
        });
        // A server that stopped reading leaves the write pending: the reply's timeout (or the
        // connection's failure) still ends the request, and is never an unhandled rejection.
        await Promise.race([written, reply]);
        const f = await reply;
        this.#refuseStray(f, request);
        let transient: unknown;
        try {
          return decodeReply(f.header, f.body, code);
        } catch (e) {
          const late = performance.now() - started + TRANSIENT_RETRY_MS >= this.#timeoutMs;
          if (late || !isReplayable(e, kind)) throw e;
          transient = e;
        }
        await this.#pause(TRANSIENT_RETRY_MS);
        // Closed during the pause: the replay is never written, the last answer stands (a
        // reply awaited on a dead connection would never come, nor its timeout fire).
        if (this.#closedWith) throw transient;
      }
    };
    const p = this.#chain.then(run, run).finally(() => this.#queued--);
    this.#chain = p.catch(() => {});
    return p;
  }

  /** A reply to another request: out of step, no later reply here can be trusted either. */
  #refuseStray(f: Frame, request: bigint): void {
    const stray = strayReply(f.header, request);
    if (stray === null) return;
    const e = new IggyConnectionError(`Iggy connection ${this.#label}: ${stray}`);
    this.#fail(e);
    throw e;
  }

  #pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#wakePause = undefined;
        resolve();
      }, ms);
      this.#wakePause = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  #nextFrame(code: number): Promise<Frame> {
    return new Promise<Frame>((resolve, reject) => {
      this.#deadline = performance.now() + this.#timeoutMs;
      this.#waitingFor = code;
      this.#waiter = { resolve, reject };
      this.#watchdog ??= setTimeout(this.#onWatchdog, this.#timeoutMs);
    });
  }

  /**
   * The request timeout: one timer per connection, re-armed for what is left of the waiting
   * request's deadline, rather than a timer per request (Deno's timers are Node `Timeout`
   * objects: a set and a clear per send is a visible share of the CPU of a send through Iggy).
   * It fires at the same moment as a timer per request would.
   */
  readonly #onWatchdog = (): void => {
    this.#watchdog = undefined;
    if (this.#waiter === undefined || this.#closedWith) return;
    const left = this.#deadline - performance.now();
    if (left > 0) {
      this.#watchdog = setTimeout(this.#onWatchdog, left);
      return;
    }
    const e = new IggyTimeoutError(
      `Iggy did not answer ${commandName(this.#waitingFor)} within ${this.#timeoutMs} ms`,
    );
    // A late reply would be taken for the next request's: this connection is done.
    this.#fail(e);
  };

  #deliver(frame: Frame): void {
    const waiter = this.#waiter;
    this.#waiter = undefined;
    const evicted = readFrameKind(frame.header) === FrameKind.EVICTION;
    if (waiter) waiter.resolve(frame);
    if (evicted) {
      // Session-terminal: decode it for the reason, then drop the connection.
      try {
        decodeReply(frame.header, frame.body, 0);
      } catch (e) {
        this.#fail(e as Error);
      }
    }
  }

  async #readLoop(): Promise<void> {
    try {
      await new FrameReader(this.#transport, (f) => this.#deliver(f), this.#label).run();
      this.#fail(new IggyConnectionError(`Iggy closed the connection ${this.#label}`));
    } catch (e) {
      this.#fail(e as Error); // always an IggyConnectionError (FrameReader wraps the rest)
    }
  }

  #fail(e: Error): void {
    if (this.#closedWith) return;
    this.#closedWith = e;
    clearTimeout(this.#watchdog);
    this.#watchdog = undefined;
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.reject(e);
    this.#wakePause?.(); // a paused replay then finds the connection closed
    try {
      this.#transport.close();
    } catch { /* already closed */ }
    this.#onClose(e);
  }

  /** Closes the connection; pending requests reject. Idempotent. */
  async close(): Promise<void> {
    this.#fail(new IggyConnectionError(`Iggy connection ${this.#label} closed by the gateway`));
    await this.#reading;
    // Not awaited: a write the server never took would hold a graceful close forever.
    this.#writer.abort().catch(() => {});
  }
}

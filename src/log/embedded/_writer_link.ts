/**
 * The main thread's end of the writer (_writer.ts): starts the Worker, matches replies to
 * requests, and turns a crashed worker into BackendError("unavailable") for every pending and
 * later call (never a hang, never a process crash).
 *
 * The writer runs in-process, behind the same interface, when it cannot run in a worker: a
 * ":memory:" store cannot be shared between threads, and under `deno run` a worker's modules
 * need read permission on their files (`deno run -P=gateway` must allow reading `./src/log`;
 * a `deno compile`d binary loads them from inside itself). Then every catalog statement runs
 * on the event loop (messages never do: they go to the message log), which
 * {@link WriterLink.mode} and the backend's stats() make visible.
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";
import { setImmediate } from "node:timers";
import { BackendError } from "../port.ts";
import { FileSync } from "./_file_sync.ts";
import { fromWireError, Writer, type WriterReply, type WriterRequest } from "./_writer.ts";

/** A request without its id (the link numbers them). */
export type WriterCall = WriterRequest extends infer R
  ? R extends { readonly id: number } ? Omit<R, "id"> : never
  : never;

/** How long open() waits for the worker to load before running the writer in-process. */
const WORKER_START_TIMEOUT_MS = 10_000;

interface Waiter {
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** Starts the writer's worker (a module worker). */
function defaultWorker(url: URL): Worker {
  return new Worker(url.href, { type: "module" });
}

/** One running writer. */
export class WriterLink {
  readonly #path: string;
  readonly #onFailure: (error: BackendError) => void;
  readonly #waiters = new Map<number, Waiter>();
  #worker: Worker | undefined;
  #inline: Writer | undefined;
  #nextId = 1;
  #failure: BackendError | undefined;
  #inProcessReason: string | undefined;
  readonly #walSync: FileSync;

  private constructor(path: string, onFailure: (error: BackendError) => void) {
    this.#path = path;
    this.#onFailure = onFailure;
    const onDisk = path !== ":memory:";
    this.#walSync = new FileSync(onDisk ? `${path}-wal` : "");
  }

  /**
   * Starts a writer on `path` (creating the store if needed) and waits until it is open.
   * `onFailure` is called once if the worker dies later.
   */
  static async start(
    path: string,
    maxStoreBytes: number,
    onFailure: (error: BackendError) => void,
    thread: "worker" | "in-process",
    o: { startWorker?: (url: URL) => Worker } = {},
  ): Promise<WriterLink> {
    const link = new WriterLink(path, onFailure);
    const notLoaded = path === ":memory:"
      ? "a :memory: store cannot be shared with a worker"
      : thread === "in-process"
      ? 'embedded.writer_thread = "in-process"'
      : await link.#startWorker(o.startWorker ?? defaultWorker);
    if (notLoaded !== undefined) {
      link.#inProcessReason = notLoaded;
      link.#inline = new Writer(path, maxStoreBytes);
      return link;
    }
    try {
      await link.request({ type: "open", path, maxStoreBytes });
    } catch (e) {
      link.#terminate();
      throw e;
    }
    return link;
  }

  /** "worker", or "in-process" with the reason when the worker could not be used. */
  get mode(): { readonly thread: "worker" | "in-process"; readonly reason?: string } {
    return this.#inline
      ? { thread: "in-process", reason: this.#inProcessReason }
      : { thread: "worker" };
  }

  /** The writer's own connection when it runs in-process, for reads. */
  get inlineDb(): DatabaseSync | undefined {
    return this.#inline?.db;
  }

  /** Why the writer stopped, once it has. */
  get failure(): BackendError | undefined {
    return this.#failure;
  }

  /** Sends a request; resolves with the writer's value, rejects with its (rebuilt) error. */
  request(call: WriterCall, transfer: Transferable[] = []): Promise<unknown> {
    if (this.#failure) return Promise.reject(this.#failure);
    const id = this.#nextId++;
    const request = { ...call, id } as WriterRequest;
    return new Promise((resolve, reject) => {
      this.#waiters.set(id, { resolve, reject });
      const inline = this.#inline;
      if (inline) {
        // A macrotask, as a worker's reply would be: back-to-back commits then still let
        // socket reads and timers run between them instead of one endless microtask chain.
        setImmediate(() => inline.handle(request).then((reply) => this.#settle(reply)));
      } else {
        this.#worker!.postMessage(request, transfer);
      }
    });
  }

  /**
   * Resolves once every transaction committed before the call is on disk (the writer commits
   * without fsync; see _file_sync.ts).
   */
  syncCommitted(): Promise<void> {
    return this.#walSync.sync();
  }

  /** Closes the store in the writer, then stops the worker. Idempotent. */
  async close(): Promise<void> {
    await this.#walSync.close();
    try {
      if (!this.#failure) await this.request({ type: "close" });
    } finally {
      this.#terminate();
      this.#failure ??= new BackendError(
        "unavailable",
        `Embedded store "${this.#path}" is closed`,
      );
    }
  }

  /**
   * Starts the worker and waits for its "loaded" hello; returns why it could not load (its
   * modules unreadable), or undefined when it runs.
   */
  #startWorker(start: (url: URL) => Worker): Promise<string | undefined> {
    const worker = start(new URL("./_writer_worker.ts", import.meta.url));
    this.#worker = worker;
    return new Promise((resolve) => {
      let loaded = false;
      // Never hang open(): a worker that neither loads nor fails in time counts as not loaded.
      const timer = setTimeout(() => {
        if (loaded) return;
        loaded = true;
        this.#terminate();
        resolve(`it did not start within ${WORKER_START_TIMEOUT_MS} ms`);
      }, WORKER_START_TIMEOUT_MS);
      worker.onmessage = (event: MessageEvent<WriterReply>) => {
        if (!loaded) {
          loaded = true;
          clearTimeout(timer);
          resolve(undefined);
          return;
        }
        this.#settle(event.data);
      };
      worker.onerror = (event: ErrorEvent) => {
        // Handled here: an uncaught error in the worker must not take the gateway down.
        event.preventDefault();
        if (loaded) return this.#fail(event.message || "uncaught error");
        loaded = true;
        clearTimeout(timer);
        this.#terminate();
        resolve(event.message || "its module did not load");
      };
      worker.onmessageerror = () => this.#fail("a reply could not be read");
    });
  }

  #settle(reply: WriterReply): void {
    const waiter = this.#waiters.get(reply.id);
    if (!waiter) return;
    this.#waiters.delete(reply.id);
    if (reply.ok) waiter.resolve(reply.value);
    else waiter.reject(fromWireError(reply.error));
  }

  #fail(reason: string): void {
    if (this.#failure) return;
    const error = new BackendError(
      "unavailable",
      `Embedded store "${this.#path}" is unavailable: its writer stopped (${reason})`,
    );
    this.#failure = error;
    this.#terminate();
    const waiters = [...this.#waiters.values()];
    this.#waiters.clear();
    for (const w of waiters) w.reject(error);
    this.#onFailure(error);
  }

  #terminate(): void {
    this.#worker?.terminate();
    this.#worker = undefined;
  }
}

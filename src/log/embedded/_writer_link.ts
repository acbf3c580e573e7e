/**
 * The main thread's end of the writer (_writer.ts): starts the Worker, matches replies to
 * requests, and turns a crashed worker into BackendError("unavailable") for every pending and
 * later call (never a hang, never a process crash).
 *
 * The writer runs in-process, behind the same interface, when it cannot run in a worker: a
 * ":memory:" store cannot be shared between threads, and under `deno run` a worker's modules
 * need read permission on their files (`deno run -P=gateway` must allow reading `./src/log`;
 * a `deno compile`d binary loads them from inside itself). Then every commit blocks the event
 * loop again, which {@link WriterLink.mode} and the backend's stats() make visible.
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";
import { setImmediate } from "node:timers";
import { BackendError } from "../port.ts";
import type { CheckpointReply, CheckpointRequest } from "./_checkpoint_worker.ts";
import { FileSync } from "./_file_sync.ts";
import { fromWireError, Writer, type WriterReply, type WriterRequest } from "./_writer.ts";

/** A request without its id (the link numbers them). */
export type WriterCall = WriterRequest extends infer R
  ? R extends { readonly id: number } ? Omit<R, "id"> : never
  : never;

/**
 * WAL bytes (estimated) committed between two checkpoints by the checkpointer (SQLite's own
 * default is 1000 pages, ~4 MB).
 */
const CHECKPOINT_BYTES = 1024 * 1024;

/**
 * WAL frames (pages) the writer may copy itself between two commits; more left after a
 * checkpointer pass means another pass first (at most MAX_PASSES per checkpoint).
 */
const TAIL_FRAMES = 64;
const MAX_PASSES = 4;

/** SQLite's default page size, and the pages a transaction rewrites besides its batch rows. */
const PAGE_BYTES = 4096;
const PAGES_PER_COMMIT = 2;

/**
 * The writer's own auto-checkpoint when a checkpointer runs: only a backstop that bounds the
 * WAL (64 MB of 4 KiB pages) should the checkpointer fall behind or die.
 */
export const BACKSTOP_CHECKPOINT_PAGES = 16384;

/** How long open() waits for the worker to load before running the writer in-process. */
const WORKER_START_TIMEOUT_MS = 10_000;

interface Waiter {
  resolve(value: unknown): void;
  reject(error: unknown): void;
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
  #checkpointer: Worker | undefined;
  /** Set for a store on disk; the checkpointer starts with the first commit, not in open(). */
  #checkpointerWanted = false;
  #checkpointing = false;
  readonly #walSync: FileSync;
  readonly #dbSync: FileSync;
  /**
   * Runs the checkpoint's last step between two transactions (the group commit's
   * `exclusive`); set by the backend. Without it the tail is left to the backstop.
   */
  betweenCommits: ((task: () => Promise<void>) => Promise<void>) | undefined;
  #walBytes = 0;

  private constructor(path: string, onFailure: (error: BackendError) => void) {
    this.#path = path;
    this.#onFailure = onFailure;
    const onDisk = path !== ":memory:";
    this.#walSync = new FileSync(onDisk ? `${path}-wal` : "");
    this.#dbSync = new FileSync(onDisk ? path : "");
  }

  /**
   * Starts a writer on `path` (creating the store if needed) and waits until it is open.
   * `onFailure` is called once if the worker dies later.
   */
  static async start(
    path: string,
    maxStoreBytes: number,
    onFailure: (error: BackendError) => void,
    thread: "worker" | "in-process" = "worker",
  ): Promise<WriterLink> {
    const link = new WriterLink(path, onFailure);
    const notLoaded = path === ":memory:"
      ? "a :memory: store cannot be shared with a worker"
      : thread === "in-process"
      ? 'embedded.writer_thread = "in-process"'
      : await link.#startWorker();
    if (notLoaded !== undefined) {
      link.#inProcessReason = notLoaded;
      const onDisk = path !== ":memory:";
      // On disk the checkpointer copies the WAL back beside the event loop, as for a worker
      // writer: a 4 MB checkpoint inside an in-process commit was the longest PUBACK delay.
      link.#inline = new Writer(
        path,
        maxStoreBytes,
        onDisk ? BACKSTOP_CHECKPOINT_PAGES : undefined,
      );
      link.#checkpointerWanted = onDisk;
      return link;
    }
    try {
      await link.request({
        type: "open",
        path,
        maxStoreBytes,
        autoCheckpointPages: BACKSTOP_CHECKPOINT_PAGES,
      });
    } catch (e) {
      link.#terminate();
      throw e;
    }
    link.#checkpointerWanted = true;
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

  /**
   * The checkpoint's tail, run while no transaction commits: the WAL on disk first (never
   * copy frames that are not durable), then the copy without SQLite's own fsyncs (they would
   * block the event loop: 15–22 ms measured), then the database file on disk before the next
   * transaction may restart the WAL over the frames just copied.
   */
  async #checkpointTail(): Promise<void> {
    await this.#walSync.sync();
    await this.request({ type: "checkpoint" });
    await this.#dbSync.sync();
  }

  /** Counts committed bytes; asks the checkpointer for a checkpoint every few MB. */
  noteCommitted(bytes: number): void {
    // WAL frames are whole pages: besides the batch rows, every transaction rewrites at least
    // the partition row's page and the last leaf page of the batch table.
    this.#walBytes += bytes + PAGES_PER_COMMIT * PAGE_BYTES;
    if (this.#checkpointerWanted) {
      // Started here rather than in open(): its worker's start-up would compete with the
      // gateway's own (start to ready), and a store nobody writes to needs no checkpoints.
      this.#checkpointerWanted = false;
      this.#startCheckpointer();
    }
    if (this.#walBytes < CHECKPOINT_BYTES || this.#checkpointing || !this.#checkpointer) return;
    this.#walBytes = 0;
    this.#checkpointing = true;
    this.#checkpointer.postMessage({ type: "checkpoint" } satisfies CheckpointRequest);
  }

  /** Closes the store in the writer, then stops the worker. Idempotent. */
  async close(): Promise<void> {
    this.#checkpointerWanted = false;
    await this.#stopCheckpointer();
    await this.#walSync.close();
    await this.#dbSync.close();
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

  /** For tests: makes the worker throw an uncaught error, as a crash would. */
  crashForTest(): void {
    this.#worker?.postMessage({ type: "crash", id: 0 });
  }

  /**
   * Starts the worker and waits for its "loaded" hello; returns why it could not load (its
   * modules unreadable), or undefined when it runs.
   */
  #startWorker(): Promise<string | undefined> {
    const worker = new Worker(new URL("./_writer_worker.ts", import.meta.url).href, {
      type: "module",
    });
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

  /**
   * Starts the checkpointer beside the writer (not awaited: until it answers, or if it
   * never does, the writer's backstop auto-checkpoint bounds the WAL).
   */
  #startCheckpointer(): void {
    const worker = new Worker(new URL("./_checkpoint_worker.ts", import.meta.url).href, {
      type: "module",
    });
    this.#checkpointer = worker;
    this.#checkpointing = true; // until "open" is answered
    let opened = false;
    let passes = 0;
    worker.onmessage = (event: MessageEvent<CheckpointReply>) => {
      if (!opened) {
        opened = true;
        this.#checkpointing = false;
        return;
      }
      // The checkpointer copied the WAL as it was when it began; the writer kept appending.
      // While what is left is large, copy again beside the writer (each pass is shorter than
      // the one before). Then the writer copies the short tail itself, between two commits:
      // SQLite restarts the WAL from its start only once every frame is copied. Without this
      // the WAL only grew until the writer's backstop auto-checkpoint did everything inside a
      // COMMIT (70–85 ms on the event loop every ~2 s under QoS 1 load).
      const left = (event.data.log ?? 0) - (event.data.checkpointed ?? 0);
      if (event.data.ok && left > TAIL_FRAMES && ++passes < MAX_PASSES) {
        worker.postMessage({ type: "checkpoint" } satisfies CheckpointRequest);
        return;
      }
      passes = 0;
      const between = this.betweenCommits;
      const done = () => {
        this.#checkpointing = false;
      };
      if (!between) return done();
      between(() => this.#checkpointTail()).catch(() => {}).finally(done);
    };
    worker.onerror = (event: ErrorEvent) => {
      event.preventDefault();
      worker.terminate();
      if (this.#checkpointer === worker) this.#checkpointer = undefined;
    };
    worker.postMessage({ type: "open", path: this.#path } satisfies CheckpointRequest);
  }

  async #stopCheckpointer(): Promise<void> {
    const worker = this.#checkpointer;
    if (!worker) return;
    this.#checkpointer = undefined;
    // Let a checkpoint in progress finish and the connection close, but never wait long.
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 1000);
      worker.onmessage = () => {
        clearTimeout(timer);
        resolve();
      };
      worker.onerror = (event: ErrorEvent) => {
        event.preventDefault();
        clearTimeout(timer);
        resolve();
      };
      worker.postMessage({ type: "close" } satisfies CheckpointRequest);
    });
    worker.terminate();
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

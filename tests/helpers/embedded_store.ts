/**
 * The embedded backend on a fresh temp file with small, explicit settings, for the tests of
 * `src/log/embedded` and of the Iggy client that compare against it.
 *
 * @module
 */
import type { OutgoingMessage } from "../../src/log/port.ts";
import { EmbeddedBackend } from "../../src/log/embedded/backend.ts";
import type { EmbeddedOptions } from "../../src/log/embedded/options.ts";

/** A backend under test, its directory, and a cleanup that closes it and removes the files. */
export interface TestStore {
  readonly backend: EmbeddedBackend;
  readonly dir: string;
  readonly path: string;
  /** Opens another backend on the same file (e.g. after close, to test reopening). */
  reopen(overrides?: Partial<EmbeddedOptions>): EmbeddedBackend;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Makes an opened backend on a temp file; `await using` closes it and removes the files. */
export async function openTestStore(overrides: Partial<EmbeddedOptions> = {}): Promise<TestStore> {
  const dir = await Deno.makeTempDir({ prefix: "embedded_test_" });
  const path = `${dir}/store.db`;
  const options: EmbeddedOptions = {
    path,
    users: [],
    maxStoreBytes: 64 * 1024 * 1024,
    retentionMaxAgeSeconds: 0,
    retentionMaxTopicBytes: 0,
    // Long: tests call runRetention() themselves rather than wait for the timer.
    retentionIntervalMs: 3_600_000,
    maxAppendBatch: 1000,
    // Unit tests run the catalog in a Worker unless they say otherwise (the gateway's default
    // is the config schema's, "in-process"), so the worker path stays covered.
    writerThread: "worker",
    ...overrides,
  };
  const backend = new EmbeddedBackend(options);
  await backend.open();
  const opened: EmbeddedBackend[] = [backend];
  return {
    backend,
    dir,
    path,
    reopen(more = {}) {
      const again = new EmbeddedBackend({ ...options, ...more });
      opened.push(again);
      return again;
    },
    async [Symbol.asyncDispose]() {
      for (const b of opened) await b.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** A message with a text payload. */
export function textMessage(body: string, headers: Record<string, string> = {}): OutgoingMessage {
  return { payload: new TextEncoder().encode(body), headers: new Map(Object.entries(headers)) };
}

/** A message of `size` payload bytes and no headers. */
export function sizedMessage(size: number): OutgoingMessage {
  return { payload: new Uint8Array(size).fill(0x61), headers: new Map() };
}

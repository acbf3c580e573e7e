/**
 * A read-only view of an embedded store file, as the `read` command opens it while a gateway
 * (in this process or another) writes to the same file.
 *
 * @module
 */
import { EmbeddedBackend } from "../../src/log/embedded/mod.ts";

/** Opens `path` read-only; close it when done. */
export async function openStoreReadOnly(path: string): Promise<EmbeddedBackend> {
  const store = new EmbeddedBackend({
    path,
    users: [],
    maxStoreBytes: 1 << 30,
    retentionMaxAgeSeconds: 0,
    retentionMaxTopicBytes: 0,
    retentionIntervalMs: 86_400_000,
    maxAppendBatch: 1,
    readOnly: true,
    writerThread: "in-process", // unused when read-only
  });
  await store.open();
  return store;
}

/**
 * Removes an embedded store: the catalog file, its WAL and shared-memory files, the message
 * log's directory beside it (`<path>-log`) and its clock ledger. Missing parts are fine.
 */
export async function removeStore(path: string): Promise<void> {
  for (const suffix of ["", "-wal", "-shm", "-log", "-clock.json", "-clock.json.tmp"]) {
    await Deno.remove(`${path}${suffix}`, { recursive: true }).catch(() => {});
  }
}

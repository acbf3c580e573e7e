/**
 * Opening the embedded store's files: the catalog writer (unless read-only), the main
 * thread's catalog connection, and the message log rebuilt from its segments.
 *
 * @module
 */
import type { DatabaseSync } from "node:sqlite";
import { BackendError } from "../port.ts";
import { directoryOf, syncDirectory } from "../durable_file.ts";
import { Catalog, loadFloors } from "./_catalog.ts";
import { TAIL_CACHE_BYTES } from "./_tail_cache.ts";
import { MessageLog } from "./_message_log.ts";
import { openDatabase } from "./_schema.ts";
import { prepareReadStatements, type ReadStatements } from "./_statements.ts";
import { WriterLink } from "./_writer_link.ts";
import type { EmbeddedOptions } from "./options.ts";

/** The files of an open store. */
export interface OpenedStore {
  /** The main thread's reading connection (the writer's own for ":memory:"). */
  readonly db: DatabaseSync;
  readonly log: MessageLog;
  readonly reads: ReadStatements;
  readonly catalog: Catalog;
  /** Absent in read-only mode. */
  readonly link: WriterLink | undefined;
}

/**
 * Opens (creating if missing) the store; on any failure closes what it opened and rejects
 * with BackendError("unavailable").
 */
export async function openStore(
  options: EmbeddedOptions,
  onWriterFailed: (e: BackendError) => void,
  onDiskRoom?: () => void,
): Promise<OpenedStore> {
  const { path, maxStoreBytes, readOnly = false } = options;
  let link: WriterLink | undefined;
  let db: DatabaseSync | undefined;
  let log: MessageLog | undefined;
  try {
    // The writer first: it creates the file and the tables the reader then opens.
    if (!readOnly) {
      link = await WriterLink.start(path, maxStoreBytes, onWriterFailed, options.writerThread, {
        startWorker: options.startWorker,
      });
    }
    db = link?.inlineDb ?? openDatabase(path, maxStoreBytes, true);
    const reads = prepareReadStatements(db);
    const catalog = new Catalog(db);
    catalog.load();
    log = await MessageLog.open({
      dir: path === ":memory:" ? path : `${path}-log`,
      maxBytes: maxStoreBytes,
      readOnly,
      floors: loadFloors(db),
      // The forwarder reads every message back as soon as it is written.
      tailCacheBytes: options.forward ? TAIL_CACHE_BYTES : 0,
      onDiskRoom,
    });
    // The names of the catalog, its WAL and the log's directory, if this open made them: our
    // fsyncs of those files (before any PUBACK or stored offset) do not make their names durable.
    if (link && path !== ":memory:") await syncDirectory(directoryOf(path));
    return { db, log, reads, catalog, link };
  } catch (e) {
    await log?.close();
    if (db && db !== link?.inlineDb) db.close();
    await link?.close().catch(() => {});
    const reason = e instanceof Error ? e.message : String(e);
    throw new BackendError("unavailable", `Cannot open embedded store "${path}": ${reason}`, {
      cause: e,
    });
  }
}

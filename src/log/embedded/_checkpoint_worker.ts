/**
 * Worker entry of the checkpointer: its own connection to the store, copying the WAL back into
 * the database file (`PRAGMA wal_checkpoint(PASSIVE)`) when the link asks, so that the writer's
 * commits never wait for a checkpoint (a 4 MB checkpoint and its fsync inside a commit were the
 * longest append latencies). PASSIVE runs beside the writer in WAL mode; if this worker is gone,
 * the writer's own auto-checkpoint (at a higher bound) still bounds the WAL.
 *
 * @module
 */
import { DatabaseSync } from "node:sqlite";

/** Requests of the checkpointer. */
export type CheckpointRequest =
  | { readonly type: "open"; readonly path: string }
  | { readonly type: "checkpoint" }
  | { readonly type: "close" };

/** The answer to a request; a checkpoint also says how many WAL frames it found and copied. */
export interface CheckpointReply {
  readonly ok: boolean;
  readonly message?: string;
  readonly log?: number;
  readonly checkpointed?: number;
}

interface WorkerScope {
  onmessage: ((event: MessageEvent<CheckpointRequest>) => void) | null;
  postMessage(message: CheckpointReply): void;
}

const scope = self as unknown as WorkerScope;
let db: DatabaseSync | undefined;

scope.onmessage = (event) => {
  const request = event.data;
  try {
    if (request.type === "open") {
      db = new DatabaseSync(request.path);
      // The checkpoint's fsyncs follow this connection's setting: keep FULL, as the writer.
      db.exec("PRAGMA synchronous = FULL");
      db.exec("PRAGMA busy_timeout = 5000");
      db.exec("PRAGMA wal_autocheckpoint = 0");
    } else if (request.type === "checkpoint") {
      // Frames in the WAL and frames copied: the link decides whether another pass is worth it.
      const row = db?.prepare("PRAGMA wal_checkpoint(PASSIVE)").get() as
        | { log: number; checkpointed: number }
        | undefined;
      scope.postMessage({ ok: true, log: row?.log ?? 0, checkpointed: row?.checkpointed ?? 0 });
      return;
    } else {
      db?.close();
      db = undefined;
    }
    scope.postMessage({ ok: true });
  } catch (e) {
    scope.postMessage({ ok: false, message: e instanceof Error ? e.message : String(e) });
  }
};

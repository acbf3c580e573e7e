/**
 * Turns store failures (SQLite's, the message log's, the disk's) into the port's
 * {@link BackendError}s, in one place.
 *
 * @module
 */
import { BackendError } from "../port.ts";

/** SQLite primary result codes we tell apart (extended codes keep these in the low byte). */
const SQLITE_FULL = 13;
const SQLITE_READONLY = 8;

/**
 * True when `e` says the store is full: the message log at its bound (BackendError "full"), or
 * SQLite at `max_page_count` or a full disk.
 */
export function isStoreFull(e: unknown): boolean {
  if (e instanceof BackendError) return e.code === "full";
  // ENOSPC from a segment write or zero-fill: the disk itself is full.
  if ((e as { code?: unknown } | null)?.code === "ENOSPC") return true;
  return sqliteCode(e) === SQLITE_FULL;
}

/**
 * Wraps a SQLite error for an operation: a full store becomes the retryable "full" (a full
 * disk makes appends `failed`, never a crash); everything else "unavailable".
 */
export function toBackendError(action: string, path: string, e: unknown): BackendError {
  if (e instanceof BackendError) return e;
  const reason = e instanceof Error ? e.message : String(e);
  if (isStoreFull(e)) {
    const bound = (e as { code?: unknown } | null)?.code === "ENOSPC" ? "disk" : "catalog";
    return new BackendError("full", `Cannot ${action}: embedded store "${path}" is full`, {
      cause: e,
      bound,
    });
  }
  if (sqliteCode(e) === SQLITE_READONLY) {
    return new BackendError("invalid", `Cannot ${action}: embedded store "${path}" is read-only`, {
      cause: e,
    });
  }
  return new BackendError("unavailable", `Cannot ${action}: ${reason}`, { cause: e });
}

function sqliteCode(e: unknown): number | undefined {
  if (typeof e !== "object" || e === null) return undefined;
  const code = (e as { errcode?: unknown }).errcode;
  return typeof code === "number" ? code & 0xff : undefined;
}

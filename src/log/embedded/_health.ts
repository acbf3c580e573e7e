/**
 * The embedded store's readiness as a plain function of its state (`/ready` shows the reason).
 *
 * @module
 */
import { BackendError, type BackendHealth } from "../port.ts";
import {
  DISK_RESERVE_BYTES,
  diskFreeBytes,
  diskFullReason,
  type DiskRoom,
  diskRoomLine,
} from "./_disk_room.ts";

/** What has gone wrong with an open store's writes, if anything. */
export interface WriteTrouble {
  /** The writer died; unavailable until reopened. */
  writerFailure?: BackendError;
  /**
   * Why appends fail with "full" (max_store_bytes, or the disk): from the last append that
   * failed so, until a commit succeeds or the disk has room again; or the disk's refusal.
   */
  full?: string;
  /** Why the last append failed (other than full), until a later commit succeeds. */
  appendFailure?: string;
}

/**
 * Ready when open and not full. With the disk of a writing store's log: also not while it
 * refuses new segments, and `detail` says its free space against the reserve.
 */
export function storeHealth(
  path: string,
  phase: "new" | "open" | "closed",
  trouble: WriteTrouble,
  room?: DiskRoom,
): BackendHealth {
  const health = storeReadiness(path, phase, {
    ...trouble,
    full: trouble.full ?? room?.refusal?.message,
  });
  return room && path !== ":memory:" ? { ...health, detail: diskRoomLine(room.dir) } : health;
}

function storeReadiness(
  path: string,
  phase: "new" | "open" | "closed",
  trouble: WriteTrouble,
): BackendHealth {
  if (phase === "new") {
    return { ready: false, reason: `Embedded store "${path}" is not open` };
  }
  if (phase === "closed") {
    return { ready: false, reason: `Embedded store "${path}" is closed` };
  }
  if (trouble.writerFailure) return { ready: false, reason: trouble.writerFailure.message };
  if (trouble.full !== undefined) return { ready: false, reason: trouble.full };
  if (trouble.appendFailure !== undefined) {
    return { ready: false, reason: `Appends are failing: ${trouble.appendFailure}` };
  }
  return { ready: true };
}

/**
 * Why an append failed with "full", in words naming the cause: the log's own errors say it
 * (max_store_bytes, or the disk holding `logDir`); any other (SQLite's) says the disk when it is
 * below the reserve, else the catalog's bound.
 */
export function fullReason(e: unknown, logDir: string, maxStoreBytes: number): string {
  if (e instanceof BackendError) return e.message;
  const free = diskFreeBytes(logDir);
  if (free !== undefined && free < DISK_RESERVE_BYTES) return diskFullReason(logDir, free, 0);
  return `The catalog is full: max_store_bytes ${maxStoreBytes} reached`;
}

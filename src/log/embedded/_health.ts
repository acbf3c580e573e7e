/**
 * The embedded store's readiness as a plain function of its state (`/ready` shows the reason).
 * A full store has up to three causes, each judged on its own so that one clearing never hides
 * another: the message log at `max_store_bytes` (from the log's own size: no room left for one
 * message of the largest size; or a refusal by it, until retention frees room), the disk holding it (the log's remembered refusal of a new
 * segment, `_disk_room.ts`), and the catalog (SQLite's own "full", until a commit succeeds).
 *
 * @module
 */
import { BackendError, type BackendHealth, type FullCause } from "../port.ts";
import {
  DISK_RESERVE_BYTES,
  diskFreeBytes,
  diskFullReason,
  type DiskRoom,
  diskRoomLine,
} from "./_disk_room.ts";
import type { MessageLog } from "./_message_log.ts";
import { segmentBytesFor } from "./_segment_table.ts";

/** What has gone wrong with an open store's writes, if anything. */
export interface WriteTrouble {
  /** The writer died; unavailable until reopened. */
  writerFailure?: BackendError;
  /**
   * Why appends fail with "full" other than by the message log's bound or its disk refusal
   * (those are judged from their state: {@link StoreRoom}): the catalog's, from the last
   * append that failed so, until a commit succeeds or room is freed.
   */
  full?: string;
  /**
   * An append was refused by `max_store_bytes` (one larger than the room left: a big batch),
   * until retention leaves room for a whole segment again; a small commit that still fits does
   * not end it, nor does room on the disk.
   */
  boundRefused?: true;
  /** Why the last append failed (other than full), until a later commit succeeds. */
  appendFailure?: string;
}

/** The room a writing store's message log has, as readiness judges it. */
export interface StoreRoom {
  /** The disk holding the log: its refusal of new segments, its free space. */
  readonly disk: DiskRoom;
  /** Bytes of the segments together, and their bound (`max_store_bytes`). */
  readonly bytes: number;
  readonly maxBytes: number;
  /** The largest append the log takes now under its bound (the disk aside). */
  readonly roomUnderBound: number;
  /** Room below which the log counts as full: one message of the largest size. */
  readonly neededBytes: number;
}

/** Bytes a stored message takes beyond its MQTT packet: its record's header and its headers. */
const MESSAGE_RECORD_BYTES = 1024;

/**
 * The log's room as readiness judges it: one message of `maxMessageBytes` (the largest packet
 * accepted) must fit, or, in a store whose segments are smaller than that, one whole segment.
 */
export function storeRoom(log: MessageLog, maxBytes: number, maxMessageBytes?: number): StoreRoom {
  const message = (maxMessageBytes ?? Infinity) + MESSAGE_RECORD_BYTES;
  return {
    disk: log.room,
    bytes: log.bytes,
    maxBytes,
    roomUnderBound: log.roomUnderBound,
    neededBytes: Math.min(message, segmentBytesFor(maxBytes)),
  };
}

/**
 * Ready when open and no cause of fullness holds ({@link fullCauses}). With a writing store's
 * room: `detail` says the disk's free space against the reserve.
 */
export function storeHealth(
  path: string,
  phase: "new" | "open" | "closed",
  trouble: WriteTrouble,
  room?: StoreRoom,
): BackendHealth {
  const health = storeReadiness(path, phase, trouble, fullCauses(trouble, room));
  return room && path !== ":memory:" ? { ...health, detail: diskRoomLine(room.disk.dir) } : health;
}

/** Each cause of fullness that holds now, in the order an operator frees them. */
export function fullCauses(trouble: WriteTrouble, room?: StoreRoom): FullCause[] {
  const causes: FullCause[] = [];
  if (room && (room.roomUnderBound < room.neededBytes || trouble.boundRefused)) {
    causes.push({ cause: "max_store_bytes", reason: boundFullReason(room) });
  }
  const refusal = room?.disk.refusal;
  if (refusal) causes.push({ cause: "disk", reason: refusal.message });
  if (trouble.full !== undefined) causes.push({ cause: "catalog", reason: trouble.full });
  return causes;
}

/** The message log at its bound, in words: how far, and what one more message needs. */
function boundFullReason(room: StoreRoom): string {
  return `The message log is full: max_store_bytes reached (${room.bytes} of ${room.maxBytes} ` +
    `bytes in segments; room for ${room.roomUnderBound} bytes, one message needs ` +
    `${room.neededBytes}); appends fail until retention frees room or the bound is raised`;
}

function storeReadiness(
  path: string,
  phase: "new" | "open" | "closed",
  trouble: WriteTrouble,
  full: FullCause[],
): BackendHealth {
  if (phase === "new") {
    return { ready: false, reason: `Embedded store "${path}" is not open` };
  }
  if (phase === "closed") {
    return { ready: false, reason: `Embedded store "${path}" is closed` };
  }
  if (trouble.writerFailure) return { ready: false, reason: trouble.writerFailure.message };
  if (full.length > 0) {
    return { ready: false, reason: full.map((f) => f.reason).join("; "), full };
  }
  if (trouble.appendFailure !== undefined) {
    return { ready: false, reason: `Appends are failing: ${trouble.appendFailure}` };
  }
  return { ready: true };
}

/**
 * Remembers what an append's "full" failure says that the log's state does not: a refusal by
 * the bound (a batch larger than the room left), or the catalog's; the disk's refusal is the
 * log's own (`DiskRoom`).
 */
export function noteFullAppend(
  trouble: WriteTrouble,
  e: unknown,
  logDir: string,
  maxStoreBytes: number,
): void {
  if (e instanceof BackendError && e.bound === "max_store_bytes") trouble.boundRefused = true;
  else if (!(e instanceof BackendError)) trouble.full = fullReason(e, logDir, maxStoreBytes);
}

/**
 * Why an append failed with "full" other than by the log's bound or disk refusal (SQLite's):
 * the disk when it is below the reserve, else the catalog's bound.
 */
function fullReason(e: unknown, logDir: string, maxStoreBytes: number): string {
  if (e instanceof BackendError) return e.message;
  const free = diskFreeBytes(logDir);
  if (free !== undefined && free < DISK_RESERVE_BYTES) return diskFullReason(logDir, free, 0);
  return `The catalog is full: max_store_bytes ${maxStoreBytes} reached`;
}

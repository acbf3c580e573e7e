/**
 * The embedded store's readiness as a plain function of its state (`/ready` shows the reason).
 *
 * @module
 */
import type { BackendError, BackendHealth } from "../port.ts";

/** What has gone wrong with an open store's writes, if anything. */
export interface WriteTrouble {
  /** The writer died; unavailable until reopened. */
  readonly writerFailure: BackendError | undefined;
  /** An append failed with "full"; cleared by the next successful commit. */
  readonly full: boolean;
  /** Why the last append failed (other than full), until a later commit succeeds. */
  readonly appendFailure: string | undefined;
}

/** Ready when open and not full. */
export function storeHealth(
  path: string,
  maxStoreBytes: number,
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
  if (trouble.full) {
    return {
      ready: false,
      reason: `Embedded store "${path}" is full (max_store_bytes ${maxStoreBytes}); ` +
        "appends fail until retention frees room or the bound is raised",
    };
  }
  if (trouble.appendFailure !== undefined) {
    return { ready: false, reason: `Appends are failing: ${trouble.appendFailure}` };
  }
  return { ready: true };
}

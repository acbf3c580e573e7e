/**
 * Checks on names and credentials shared by the backend's methods.
 *
 * @module
 */
import { BackendError, type OutgoingMessage, type PartitionAddress } from "../port.ts";
import { DEFAULT_ITERATIONS } from "../../access/password.ts";
import type { UserConfig } from "../../config/types.ts";
import { utf8Length } from "../../base/utf8.ts";

/** Iggy's rule for stream and topic names: 1..255 bytes. */
export function validateName(kind: "stream" | "topic", name: string): void {
  const bytes = utf8Length(name);
  if (bytes < 1 || bytes > 255) {
    throw new BackendError("invalid", `Cannot use ${kind} name "${name}": must be 1 to 255 bytes`);
  }
}

/**
 * A well-formed hash no password matches, with the same work factor as the configured users,
 * so an unknown username takes as long to refuse as a wrong password (no user enumeration by
 * timing).
 */
export function dummyPasswordHash(users: readonly UserConfig[]): string {
  const hashed = users.find((u) => u.passwordHash !== null)?.passwordHash;
  const iterations = Number(hashed?.split("$")[1]) || DEFAULT_ITERATIONS;
  return `pbkdf2-sha256$${iterations}$${btoa("\0".repeat(16))}$${btoa("\0".repeat(32))}`;
}

/** Why an append batch is refused before it is queued, or null when it may be appended. */
export function checkAppendBatch(messages: readonly OutgoingMessage[]): BackendError | null {
  if (messages.length === 0) {
    return new BackendError("invalid", "Cannot append: the batch has no messages");
  }
  for (let i = 0; i < messages.length; i++) {
    if (messages[i].payload.length === 0) {
      return new BackendError("invalid", "Cannot append: a payload is empty");
    }
  }
  return null;
}

/** `state` when it has the address's partition, else BackendError("not_found") naming what is missing. */
export function existingPartition<T extends { readonly partitions: number }>(
  state: T | undefined,
  address: PartitionAddress,
  action: string,
): T {
  const { stream, topic, partition } = address;
  if (!state) {
    throw new BackendError(
      "not_found",
      `Cannot ${action} "${stream}/${topic}": no such stream or topic`,
    );
  }
  if (!Number.isInteger(partition) || partition < 0 || partition >= state.partitions) {
    throw new BackendError(
      "not_found",
      `Cannot ${action} "${stream}/${topic}": partition ${partition} does not exist (${state.partitions} partitions)`,
    );
  }
  return state;
}

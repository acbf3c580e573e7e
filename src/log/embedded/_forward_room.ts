/**
 * Forward mode's hold on retention, from the backend's options: a partition keeps every
 * message after the forwarder's stored offset (the last one the upstream confirmed).
 *
 * @module
 */
import type { ForwardRoom } from "./_retention_runner.ts";
import type { EmbeddedOptions } from "./options.ts";
import type { ReadStatements } from "./_statements.ts";

/** A consumer's stored offset on a partition of a topic (by id), or null. */
export type StoredOffsetOf = (
  consumer: string,
  topicId: number,
  partition: number,
) => number | null;

/** The retention runner's forward settings, or undefined outside forward mode. */
export function forwardRoom(
  options: EmbeddedOptions,
  offsetOf: StoredOffsetOf,
): ForwardRoom | undefined {
  const forward = options.forward;
  if (!forward) return undefined;
  return {
    maxStoreBytes: options.maxStoreBytes,
    hold: {
      dropUnforwarded: forward.whenFull === "drop_oldest",
      firstUnforwarded: (topicId, partition) => {
        const offset = offsetOf(forward.consumer, topicId, partition);
        return offset === null ? 0 : offset + 1;
      },
    },
  };
}

/** A consumer's stored offset on a partition of a topic (by id), or null when none is stored. */
export function storedOffset(
  reads: ReadStatements,
  consumer: string,
  topicId: number,
  partition: number,
): number | null {
  const row = reads.selectConsumerOffset.get(consumer, topicId, partition);
  return (row as { consumer_offset: number } | undefined)?.consumer_offset ?? null;
}

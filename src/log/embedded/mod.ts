/**
 * The embedded log backend: Iggy's data model — streams, topics, partitions,
 * offsets, consumer offsets — in a message log of segment files beside a SQLite catalog via
 * `node:sqlite`, with group commit, a size bound and background retention. What other folders
 * may import.
 *
 * @module
 */
export { EmbeddedBackend } from "./backend.ts";
export type { EmbeddedOptions, EmbeddedStats } from "./options.ts";
export { DISK_RESERVE_BYTES, diskRoomLine, loadDiskMeasure } from "./_disk_room.ts";

/**
 * Request bodies that differ on 0.12: CREATE_TOPIC options (`enforce_fsync` is gone; a topic
 * whose receipts mean "on disk" asks for `durability = persisted`).
 *
 * @module
 */

import { createTopicBodyWith } from "../v11/request_bodies.ts";
import { encodeUserHeaders } from "../encoding.ts";

/** The 0.12 topic option that makes a receipt crash-safe, and its value. */
export const DURABILITY_OPTION = "durability";
/** See {@link DURABILITY_OPTION}. */
export const DURABILITY_PERSISTED = "persisted";

/** CREATE_TOPIC body on 0.12: a durable topic asks for `durability = persisted`. */
export const createTopicBody012 = createTopicBodyWith((w) =>
  w.bytes(encodeUserHeaders(new Map([[DURABILITY_OPTION, DURABILITY_PERSISTED]])))
);

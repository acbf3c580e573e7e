/**
 * Request bodies that differ on 0.12: CREATE_TOPIC options (`enforce_fsync` is gone; a topic
 * whose receipts mean "on disk" asks for `durability = persisted`).
 *
 * @module
 */

import { ByteWriter } from "../bytes.ts";
import type { TopicOptions } from "../commands.ts";
import { encodeUserHeaders, writeIdentifier, writeName, writeU64Option } from "../encoding.ts";

/** The 0.12 topic option that makes a receipt crash-safe, and its value. */
export const DURABILITY_OPTION = "durability";
/** See {@link DURABILITY_OPTION}. */
export const DURABILITY_PERSISTED = "persisted";

/** CREATE_TOPIC body on 0.12: `[stream Id][partitions:u32][name][options TLV]`. */
export function createTopicBody012(stream: string, topic: string, o: TopicOptions): Uint8Array {
  const w = new ByteWriter();
  writeIdentifier(w, stream);
  w.u32(o.partitions);
  writeName(w, topic, "Topic name");
  if (o.messageExpiryMicros) writeU64Option(w, "message_expiry", o.messageExpiryMicros);
  if (o.maxTopicBytes) writeU64Option(w, "max_topic_size", o.maxTopicBytes);
  if (o.durable) w.bytes(encodeUserHeaders(new Map([[DURABILITY_OPTION, DURABILITY_PERSISTED]])));
  return w.finish();
}

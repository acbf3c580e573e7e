/**
 * Metadata records of 0.12: the topic header lost its fixed
 * expiry/compression/max-size fields (33 fixed bytes), partition records carry their context
 * and node lists, streams and users gained a derived-options block. The decoded shapes are
 * those of `../records.ts`, so the backend above does not care which dialect it speaks.
 *
 * @module
 */

import { ByteReader } from "../bytes.ts";
import { decodeUserHeaders, readName } from "../encoding.ts";
import {
  decodePermissions,
  type PartitionRecord,
  type StreamRecord,
  type TopicRecord,
  type UserRecord,
} from "../records.ts";

function readOptions(r: ByteReader, what: string): Map<string, string> {
  return decodeUserHeaders(r.bytes(r.u32(`${what} length`), what));
}

function skipOptions(r: ByteReader, what: string): void {
  r.skip(r.u32(`${what} length`), what);
}

/** `[id][created_at][topics_count][size][messages][name][opts][derived opts]`. */
export function readStream012(r: ByteReader): StreamRecord {
  const id = r.u32("stream id");
  r.skip(8, "stream created_at");
  const topicsCount = r.u32("stream topics_count");
  r.skip(16, "stream size and messages");
  const name = readName(r, "stream name");
  skipOptions(r, "stream options");
  skipOptions(r, "stream derived options");
  return { id, name, topicsCount };
}

/** The 33-byte topic header, name, explicit then derived options (explicit wins). */
export function readTopicHeader012(r: ByteReader): TopicRecord {
  const id = r.u32("topic id");
  r.skip(8, "topic created_at");
  const partitionsCount = r.u32("topic partitions_count");
  r.skip(16, "topic size and messages");
  const name = readName(r, "topic name");
  const explicit = readOptions(r, "topic options");
  const options = readOptions(r, "topic derived options");
  for (const [k, v] of explicit) options.set(k, v);
  return { id, name, partitionsCount, partitions: [], options };
}

function readNodes(r: ByteReader, what: string): void {
  r.skip(r.u8(`${what} count`), what);
}

/** A partition record: 40 bytes as 0.11, 24 bytes of context, members, in-sync members. */
export function readPartition012(r: ByteReader): PartitionRecord {
  const id = r.u32("partition id");
  r.skip(12, "partition created_at, segments");
  const currentOffset = r.u64n("partition current_offset");
  r.skip(8, "partition size");
  const messagesCount = r.u64n("partition messages_count");
  r.skip(24, "partition context");
  readNodes(r, "partition members");
  readNodes(r, "partition in-sync members");
  return { id, currentOffset, messagesCount };
}

/** GET_STREAMS body. */
export function decodeStreams012(body: Uint8Array): StreamRecord[] {
  const r = new ByteReader(body);
  const out: StreamRecord[] = [];
  while (r.remaining > 0) out.push(readStream012(r));
  return out;
}

/** GET_STREAM body: the stream then its topic headers; null when empty. */
export function decodeStreamDetails012(
  body: Uint8Array,
): { stream: StreamRecord; topics: TopicRecord[] } | null {
  if (body.length === 0) return null;
  const r = new ByteReader(body);
  const stream = readStream012(r);
  const topics: TopicRecord[] = [];
  while (r.remaining > 0) topics.push(readTopicHeader012(r));
  return { stream, topics };
}

/** GET_TOPIC / CREATE_TOPIC body: header then partition records; null when empty. */
export function decodeTopic012(body: Uint8Array): TopicRecord | null {
  if (body.length === 0) return null;
  const r = new ByteReader(body);
  const header = readTopicHeader012(r);
  const partitions: PartitionRecord[] = [];
  while (r.remaining > 0) partitions.push(readPartition012(r));
  return { ...header, partitions };
}

/** GET_USER body: the user, two options blocks, then permissions as in 0.11; null when empty. */
export function decodeUser012(body: Uint8Array): UserRecord | null {
  if (body.length === 0) return null;
  const r = new ByteReader(body);
  const id = r.u32("user id");
  r.skip(8, "user created_at");
  const status = r.u8("user status");
  const username = readName(r, "username");
  skipOptions(r, "user options");
  skipOptions(r, "user derived options");
  if (r.remaining === 0) return { id, status, username, permissions: null };
  const has = r.u8("has_permissions");
  if (has === 0) {
    r.skip(3, "no-permissions padding");
    return { id, status, username, permissions: null };
  }
  const len = r.u32("permissions length");
  return { id, status, username, permissions: decodePermissions(r.bytes(len, "permissions")) };
}

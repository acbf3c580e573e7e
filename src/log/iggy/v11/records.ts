/**
 * Decoders for the metadata replies the backend reads: streams, topics with
 * their partitions, and user details with permissions (numeric ids, as the wire has them).
 *
 * @module
 */

import { BackendError, type PartitionAddress } from "../../port.ts";
import { ByteReader } from "../bytes.ts";
import { decodeUserHeaders, readName } from "../encoding.ts";

/** A stream record (GET_STREAM / GET_STREAMS / CREATE_STREAM). */
export interface StreamRecord {
  readonly id: number;
  readonly name: string;
  readonly topicsCount: number;
}

/** One partition of a topic. */
export interface PartitionRecord {
  readonly id: number;
  /** Offset of the last message (0 also when empty; see `messagesCount`). */
  readonly currentOffset: number;
  readonly messagesCount: number;
}

/** A topic record (TopicHeader, with partitions when GET_TOPIC / CREATE_TOPIC). */
export interface TopicRecord {
  readonly id: number;
  readonly name: string;
  readonly partitionsCount: number;
  readonly partitions: PartitionRecord[];
  /** Explicit options over the server-derived ones, as text (`decodeUserHeaders`). */
  readonly options: ReadonlyMap<string, string>;
  /** Retention by age (µs; 0: the server's default; 2^53 − 1 or more: never), when told. */
  readonly messageExpiryMicros?: number;
}

function readOptions(r: ByteReader, what: string): Map<string, string> {
  return decodeUserHeaders(r.bytes(r.u32(`${what} length`), what));
}

function skipOptions(r: ByteReader, what: string): void {
  r.skip(r.u32(`${what} length`), what);
}

/** Where the metadata records of the two protocols differ. */
export interface RecordLayout {
  /** Bytes of a topic header between partitions_count and the name. */
  readonly topicFixedTail: number;
  /** What those bytes hold, for errors. */
  readonly topicFixedTailHolds: string;
  /** Those bytes begin with the topic's message expiry (0.11); else the expiry is an option. */
  readonly topicTailExpiry?: boolean;
  /** Streams and users carry a derived-options block after their own options (0.12). */
  readonly derivedOptions: boolean;
  /** One partition record of GET_TOPIC / CREATE_TOPIC. */
  readPartition(r: ByteReader): PartitionRecord;
}

/** A protocol's decoders of the metadata replies the backend reads. */
export interface RecordDecoders {
  /** GET_STREAMS body: stream records to the end. */
  decodeStreams(body: Uint8Array): StreamRecord[];
  /** GET_STREAM body: the stream then its topic headers; null when empty (not found). */
  decodeStreamDetails(body: Uint8Array): { stream: StreamRecord; topics: TopicRecord[] } | null;
  /** GET_TOPIC / CREATE_TOPIC body: the topic header then its partitions; null when empty. */
  decodeTopic(body: Uint8Array): TopicRecord | null;
  /** GET_USER body: the user, its options, then its permissions; null when empty. */
  decodeUser(body: Uint8Array): UserRecord | null;
}

/** A stream record in `layout`: `[id][created_at][topics_count][size][messages][name][opts]…`. */
function readStream(r: ByteReader, layout: RecordLayout): StreamRecord {
  const id = r.u32("stream id");
  r.skip(8, "stream created_at");
  const topicsCount = r.u32("stream topics_count");
  r.skip(16, "stream size and messages");
  const name = readName(r, "stream name");
  skipOptions(r, "stream options");
  if (layout.derivedOptions) skipOptions(r, "stream derived options");
  return { id, name, topicsCount };
}

/** A topic header (without partitions) in `layout`; explicit options win over derived ones. */
function readTopicHeader(r: ByteReader, layout: RecordLayout): TopicRecord {
  const id = r.u32("topic id");
  r.skip(8, "topic created_at");
  const partitionsCount = r.u32("topic partitions_count");
  let expiry = layout.topicTailExpiry ? r.u64("topic message_expiry") : undefined;
  r.skip(layout.topicFixedTail - (expiry === undefined ? 0 : 8), layout.topicFixedTailHolds);
  const name = readName(r, "topic name");
  const explicit = readOptions(r, "topic options");
  const options = readOptions(r, "topic derived options");
  for (const [k, v] of explicit) options.set(k, v);
  if (expiry === undefined && /^\d+$/.test(options.get("message_expiry") ?? "")) {
    expiry = BigInt(options.get("message_expiry")!);
  }
  // u64::MAX is Iggy's "never expire" (past 2^53 − 1: never), as 0 is: no expiry of the topic's own.
  const never = expiry === undefined || expiry === 0n || expiry >= BigInt(Number.MAX_SAFE_INTEGER);
  const messageExpiryMicros = never ? undefined : Number(expiry);
  return { id, name, partitionsCount, partitions: [], options, messageExpiryMicros };
}

/** The decoders of one protocol's record layout. */
export function recordDecoders(layout: RecordLayout): RecordDecoders {
  return {
    decodeStreams(body) {
      const r = new ByteReader(body);
      const out: StreamRecord[] = [];
      while (r.remaining > 0) out.push(readStream(r, layout));
      return out;
    },
    decodeStreamDetails(body) {
      if (body.length === 0) return null;
      const r = new ByteReader(body);
      const stream = readStream(r, layout);
      const topics: TopicRecord[] = [];
      while (r.remaining > 0) topics.push(readTopicHeader(r, layout));
      return { stream, topics };
    },
    decodeTopic(body) {
      if (body.length === 0) return null;
      const r = new ByteReader(body);
      const header = readTopicHeader(r, layout);
      const partitions: PartitionRecord[] = [];
      while (r.remaining > 0) partitions.push(layout.readPartition(r));
      return { ...header, partitions };
    },
    decodeUser(body) {
      if (body.length === 0) return null;
      const r = new ByteReader(body);
      const id = r.u32("user id");
      r.skip(8, "user created_at");
      const status = r.u8("user status");
      const username = readName(r, "username");
      skipOptions(r, "user options");
      if (layout.derivedOptions) skipOptions(r, "user derived options");
      if (r.remaining === 0) return { id, status, username, permissions: null };
      if (r.u8("has_permissions") === 0) {
        r.skip(3, "no-permissions padding");
        return { id, status, username, permissions: null };
      }
      const len = r.u32("permissions length");
      return { id, status, username, permissions: decodePermissions(r.bytes(len, "permissions")) };
    },
  };
}

/** A 0.11 partition record (40 bytes; the head of a 0.12 one). */
export function readPartition011(r: ByteReader): PartitionRecord {
  const id = r.u32("partition id");
  r.skip(12, "partition created_at, segments");
  const currentOffset = r.u64n("partition current_offset");
  r.skip(8, "partition size");
  const messagesCount = r.u64n("partition messages_count");
  return { id, currentOffset, messagesCount };
}

/** The records of protocol 0.11: 40-byte partitions, no derived options on streams or users. */
const RECORDS_011 = recordDecoders({
  topicFixedTail: 8 + 1 + 8 + 8 + 8,
  topicFixedTailHolds: "topic expiry, compression, max size, size, messages",
  topicTailExpiry: true,
  derivedOptions: false,
  readPartition: readPartition011,
});

export const { decodeStreams, decodeStreamDetails, decodeTopic, decodeUser } = RECORDS_011;

/** Offset the next message of a partition gets: current_offset is the last one written. */
export function nextOffsetOf(p: PartitionRecord): number {
  return p.messagesCount === 0 && p.currentOffset === 0 ? 0 : p.currentOffset + 1;
}

/**
 * The next offset of `address`'s partition in its topic's record (null: the topic is gone);
 * a missing topic or partition is a `not_found` BackendError.
 */
export function nextOffsetIn(record: TopicRecord | null, address: PartitionAddress): number {
  const where = `stream "${address.stream}" topic "${address.topic}"`;
  if (!record) {
    throw new BackendError("not_found", `Cannot read next offset: ${where} does not exist`);
  }
  const p = record.partitions.find((x) => x.id === address.partition);
  if (p) return nextOffsetOf(p);
  throw new BackendError(
    "not_found",
    `Cannot read next offset: ${where} has no partition ${address.partition}`,
  );
}

/** Per-topic permission flags with the numeric topic id. */
export interface WireTopicPermissions {
  readonly topicId: number;
  readonly flags: readonly boolean[]; // manage_topic, read_topic, poll_messages, send_messages
}

/** Per-stream permission flags with the numeric stream id. */
export interface WireStreamPermissions {
  readonly streamId: number;
  /** manage_stream, read_stream, manage_topics, read_topics, poll_messages, send_messages */
  readonly flags: readonly boolean[];
  readonly topics: WireTopicPermissions[];
}

/** Permissions as GET_USER sends them (ids, not names). */
export interface WirePermissions {
  /** The 10 global flags in wire order. */
  readonly global: readonly boolean[];
  readonly streams: WireStreamPermissions[];
}

/** A decoded GET_USER reply. */
export interface UserRecord {
  readonly id: number;
  /** 1 = active, 2 = inactive. */
  readonly status: number;
  readonly username: string;
  readonly permissions: WirePermissions | null;
}

function flags(r: ByteReader, n: number): boolean[] {
  return Array.from({ length: n }, () => r.u8("permission flag") !== 0);
}

/** Decodes the permissions block. */
export function decodePermissions(body: Uint8Array): WirePermissions {
  const r = new ByteReader(body);
  const global = flags(r, 10);
  const streams: WireStreamPermissions[] = [];
  let more = r.u8("has_streams") !== 0;
  while (more) {
    const streamId = r.u32("stream id");
    const sf = flags(r, 6);
    const topics: WireTopicPermissions[] = [];
    let moreTopics = r.u8("has_topics") !== 0;
    while (moreTopics) {
      const topicId = r.u32("topic id");
      topics.push({ topicId, flags: flags(r, 4) });
      moreTopics = r.u8("has_next_topic") !== 0;
    }
    streams.push({ streamId, flags: sf, topics });
    more = r.u8("has_next_stream") !== 0;
  }
  return { global, streams };
}

/**
 * Request bodies of the commands the backend sends, streams and topics
 * always by name, and the one small reply the other modules do not decode (consumer offset).
 *
 * @module
 */

import { ByteReader, ByteWriter } from "../bytes.ts";
import {
  PollingKind,
  writeBoolOption,
  writeConsumer,
  writeIdentifier,
  writeName,
  writePartition,
  writePollingStrategy,
  writeU32Option,
  writeU64Option,
} from "../encoding.ts";

/** GET_STREAM body. */
export function getStreamBody(stream: string): Uint8Array {
  return writeIdentifier(new ByteWriter(), stream).finish();
}

/** GET_TOPIC body: `[stream Id][topic Id]`. */
export function getTopicBody(stream: string, topic: string): Uint8Array {
  const w = new ByteWriter();
  writeIdentifier(w, stream);
  writeIdentifier(w, topic);
  return w.finish();
}

/** CREATE_STREAM body: `[name][no options]`. */
export function createStreamBody(stream: string): Uint8Array {
  return writeName(new ByteWriter(), stream, "Stream name").finish();
}

/** Options of a new topic; 0 = the server's default. */
export interface TopicOptions {
  readonly partitions: number;
  readonly messageExpiryMicros?: number;
  readonly maxTopicBytes?: number;
  /** Acknowledge sends only once on disk: fsync, and persist every batch (no journal wait). */
  readonly durable?: boolean;
}

/** Topic option keys of Iggy 0.9 (protocol 0.11) that decide when a send is on disk. */
export const FSYNC_OPTION = "enforce_fsync";
export const FLUSH_COUNT_OPTION = "messages_required_to_save";

/**
 * CREATE_TOPIC body: `[stream Id][partitions:u32][name][options TLV]`; `durable` writes the
 * dialect's own options (`durableOptions`).
 */
export function createTopicBodyWith(
  durableOptions: (w: ByteWriter) => void,
): (stream: string, topic: string, o: TopicOptions) => Uint8Array {
  return (stream, topic, o) => {
    const w = new ByteWriter();
    writeIdentifier(w, stream);
    w.u32(o.partitions);
    writeName(w, topic, "Topic name");
    if (o.messageExpiryMicros) writeU64Option(w, "message_expiry", o.messageExpiryMicros);
    if (o.maxTopicBytes) writeU64Option(w, "max_topic_size", o.maxTopicBytes);
    if (o.durable) durableOptions(w);
    return w.finish();
  };
}

/**
 * CREATE_TOPIC body on 0.11. Iggy 0.9 keeps sends in a journal until 1,024 messages or 1 MiB
 * (its defaults) and then writes without fsync, so a kill -9 loses acknowledged messages: a
 * durable topic fsyncs, and one message flushes.
 */
export const createTopicBody = createTopicBodyWith((w) => {
  writeBoolOption(w, FSYNC_OPTION, true);
  writeU32Option(w, FLUSH_COUNT_OPTION, 1);
});

/** Where a consumer-offset or poll command points. */
export interface Target {
  readonly stream: string;
  readonly topic: string;
  readonly partition: number;
}

/** POLL_MESSAGES body: plain consumer, Offset strategy, explicit partition, no auto-commit. */
export function pollBody(
  consumer: string,
  t: Target,
  fromOffset: number,
  count: number,
): Uint8Array {
  const w = new ByteWriter();
  writeConsumer(w, consumer);
  writeIdentifier(w, t.stream);
  writeIdentifier(w, t.topic);
  writePartition(w, t.partition);
  writePollingStrategy(w, PollingKind.OFFSET, fromOffset);
  w.u32(count).u8(0);
  return w.finish();
}

/** The fields every consumer-offset request starts with: consumer, stream, topic, partition. */
function offsetRequest(consumer: string, t: Target): ByteWriter {
  const w = new ByteWriter();
  writeConsumer(w, consumer);
  writeIdentifier(w, t.stream);
  writeIdentifier(w, t.topic);
  writePartition(w, t.partition);
  return w;
}

/** STORE_CONSUMER_OFFSET body, ack level Quorum (1) as the SDKs send. */
export function storeOffsetBody(consumer: string, t: Target, offset: number): Uint8Array {
  return offsetRequest(consumer, t).u64(offset).u8(1).finish();
}

/** GET_CONSUMER_OFFSET body. */
export function getOffsetBody(consumer: string, t: Target): Uint8Array {
  return offsetRequest(consumer, t).finish();
}

/** DELETE_CONSUMER_OFFSET body (protocol 0.12): the same fields as GET_CONSUMER_OFFSET's. */
export function deleteOffsetBody(consumer: string, t: Target): Uint8Array {
  return getOffsetBody(consumer, t);
}

/**
 * DELETE_CONSUMER_OFFSET body of protocol 0.11 (Iggy 0.9): GET_CONSUMER_OFFSET's fields and the
 * ack level Quorum (1), as STORE's; without it the server cannot decode the request and refuses
 * it with error 20 (resource not found).
 */
export function deleteOffsetBodyWithAck(consumer: string, t: Target): Uint8Array {
  return offsetRequest(consumer, t).u8(1).finish();
}

/** GET_CONSUMER_OFFSET reply: stored offset, or null when empty (none stored). */
export function decodeOffsetReply(body: Uint8Array): number | null {
  if (body.length === 0) return null;
  const r = new ByteReader(body);
  r.u32("partition_id");
  r.u64("current_offset");
  return r.u64n("stored_offset");
}

/**
 * Test helper: encoders for the server's metadata records, as Iggy 0.9 writes them, so
 * tests can feed decoders and the fake server realistic bodies.
 *
 * @module
 */

import { ByteWriter } from "../../../src/log/iggy/bytes.ts";
import { writeName } from "../../../src/log/iggy/encoding.ts";

/** A stream record. */
export function streamBytes(w: ByteWriter, id: number, name: string, topics = 0): ByteWriter {
  w.u32(id).u64(1).u32(topics).u64(0).u64(0);
  return writeName(w, name).u32(0);
}

/** A topic header. */
export function topicHeaderBytes(
  w: ByteWriter,
  id: number,
  name: string,
  partitions: number,
): ByteWriter {
  w.u32(id).u64(1).u32(partitions).u64(0).u8(1).u64(0).u64(0).u64(0);
  return writeName(w, name).u32(0).u32(0);
}

/** A partition record. */
export function partitionBytes(
  w: ByteWriter,
  id: number,
  currentOffset: number,
  messages: number,
): ByteWriter {
  return w.u32(id).u64(1).u32(1).u64(currentOffset).u64(0).u64(messages);
}

/** A GET_TOPIC body with partitions given as [currentOffset, messages]. */
export function topicBody(name: string, partitions: [number, number][]): Uint8Array {
  const w = new ByteWriter();
  topicHeaderBytes(w, 0, name, partitions.length);
  partitions.forEach(([o, m], i) => partitionBytes(w, i, o, m));
  return w.finish().slice();
}

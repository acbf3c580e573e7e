/**
 * Iggy frames of messages still in the stored encoding (`EncodedMessages`: the forwarder's
 * copies of the embedded log), and the frame header every message of a send gets (shared
 * with `send_encoder.ts`, which writes decoded messages beside them).
 *
 * @module
 */
import type { EncodedMessages, OutgoingMessage } from "../port.ts";
import { FRAME_HEADER_SIZE } from "./batch.ts";
import {
  OffsetDigits,
  stampBytesOf,
  type StampTlv,
  stampTlv,
  tlvBytesOf,
  writeStampTlv,
  writeTlvOf,
} from "./blob_to_tlv.ts";

/**
 * What a send carries: messages, or runs of messages still in the stored encoding (forwarding,
 * `blob_to_tlv.ts`), or both.
 */
export type SendItem = OutgoingMessage | EncodedMessages;

/**
 * A frame's header at `frame` but its checksum and headers' length: the id (u128 LE) is the
 * batch's random `idBase` with the index added to its low word, so ids are distinct within a
 * batch and random across batches; never zero (top bit set).
 */
export function writeFrameHeader(
  out: Uint8Array,
  dv: DataView,
  frame: number,
  index: number,
  payloadBytes: number,
  idBase: Uint8Array,
): void {
  out.set(idBase, frame + 8);
  dv.setUint32(frame + 8, (dv.getUint32(frame + 8, true) + index) >>> 0, true);
  out[frame + 23] |= 0x80;
  dv.setUint32(frame + 24, index, true); // offset_delta
  dv.setUint32(frame + 28, 0, true); // timestamp_delta: every message has the batch's time
  dv.setUint32(frame + 36, payloadBytes, true);
  dv.setUint32(frame + 40, 0, true); // reserved (u64), must be 0
  dv.setUint32(frame + 44, 0, true);
}

export function isRun(item: SendItem): item is EncodedMessages {
  return (item as EncodedMessages).spans !== undefined;
}

/** A run's frames from `at`, the first with index `first`; returns the end. */
export function writeRunFrames(
  out: Uint8Array,
  dv: DataView,
  at: number,
  run: EncodedMessages,
  first: number,
  idBase: Uint8Array,
): number {
  const { pieces, spans } = run;
  const stamp: StampTlv | null = run.stamp ? stampTlv(run.stamp) : null;
  const offset = new OffsetDigits(run.firstOffset);
  for (let j = 0; j < run.count; j++) {
    const bytes = pieces[spans[4 * j]];
    const headersAt = spans[4 * j + 1];
    const payloadAt = spans[4 * j + 2];
    const payloadEnd = spans[4 * j + 3];
    const payloadBytes = payloadEnd - payloadAt;
    if (payloadBytes === 0) throw new RangeError("a message payload is empty");
    const frame = at;
    writeFrameHeader(out, dv, frame, first + j, payloadBytes, idBase);
    out.set(bytes.subarray(payloadAt, payloadEnd), frame + FRAME_HEADER_SIZE);
    const headersStart = frame + FRAME_HEADER_SIZE + payloadBytes;
    at = writeTlvOf(out, headersStart, bytes, headersAt, payloadAt);
    if (stamp !== null) at = writeStampTlv(out, at, stamp, offset);
    offset.increment();
    dv.setUint32(frame + 32, at - headersStart, true);
  }
  return at;
}

/**
 * A run's frames' exact bytes; throws EncodeError on headers Iggy refuses. The batcher's
 * `sizeOf` for a run: the sum it hands `encode` as `framesBound` is then exact.
 */
export function runWireBytes(run: EncodedMessages): number {
  const { pieces, spans } = run;
  let n = FRAME_HEADER_SIZE * run.count + run.payloadBytes;
  for (let j = 0; j < run.count; j++) {
    n += tlvBytesOf(pieces[spans[4 * j]], spans[4 * j + 1], spans[4 * j + 2]);
  }
  if (run.stamp) {
    const stamp = stampTlv(run.stamp);
    for (let j = 0; j < run.count; j++) n += stampBytesOf(stamp, run.firstOffset + j);
  }
  return n;
}

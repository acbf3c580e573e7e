/**
 * A PUBLISH topic name read from its bytes, or the connection's last one when the bytes repeat
 * (a device publishes to the same topic again and again): decoding and checking it once saves
 * QoS 0 ingest CPU.
 *
 * @module
 */
import { checkTopicName, type DecoderLimits } from "./_fields.ts";
import { decodeMqttString } from "./mqtt_string.ts";

/**
 * A decoded, validated topic name and the bytes it came from: a copy of them when the name is
 * not all ASCII, else null (the name's char codes are its bytes). An ASCII name keeps no bytes
 * of its own: most are, and this is kept per publishing connection.
 */
export interface LastTopic {
  bytes: Uint8Array | null;
  topic: string;
}

/** True when `b[from, from + a.length)` equals `a`. */
function sameBytes(a: Uint8Array, b: Uint8Array, from: number): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[from + i]) return false;
  return true;
}

/** True when `b[from, from + a.length)` are the char codes of `a` (an ASCII string). */
function sameChars(a: string, b: Uint8Array, from: number): boolean {
  for (let i = 0; i < a.length; i++) if (a.charCodeAt(i) !== b[from + i]) return false;
  return true;
}

/** A PUBLISH topic name at `b[from, to)`, checked, or the last one when the bytes repeat. */
export function readTopic(
  b: Uint8Array,
  from: number,
  to: number,
  limits: DecoderLimits,
  last: LastTopic,
): string {
  const n = to - from;
  const bytes = last.bytes;
  if (
    n > 0 &&
    (bytes === null
      ? n === last.topic.length && sameChars(last.topic, b, from)
      : n === bytes.length && sameBytes(bytes, b, from))
  ) {
    // Same bytes as the last topic: already decoded and validated (UTF-8, U+0000, wildcards,
    // levels). Saves QoS 0 ingest CPU (a flood repeats its topic), and the string keeps its
    // cached hash.
    return last.topic;
  }
  const topic = decodeMqttString(b, from, to);
  checkTopicName(topic, limits);
  // As many chars as bytes: every char was one byte, ASCII. Else a copy (`slice` of a node
  // Buffer is a view, which would keep the whole read chunk).
  last.bytes = topic.length === n ? null : new Uint8Array(b.subarray(from, to));
  last.topic = topic;
  return topic;
}

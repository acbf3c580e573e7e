/**
 * Reading messages back: rows of one partition from an offset, decoded to the port's shape.
 *
 * @module
 */
import type { StoredMessage } from "../port.ts";
import type { TopicState } from "./_catalog.ts";
import { decodeHeaders } from "./_headers.ts";
import type { Statements } from "./_statements.ts";

interface MessageRow {
  message_offset: number;
  timestamp_micros: number;
  headers: Uint8Array;
  payload: Uint8Array;
}

/**
 * Up to `count` messages of a partition with offset ≥ `fromOffset`, in offset order. Offsets
 * removed by retention are simply absent: the first message may come after `fromOffset`.
 */
export function readMessages(
  stmts: Statements,
  state: TopicState,
  partition: number,
  fromOffset: number,
  count: number,
): StoredMessage[] {
  if (!(count > 0)) return [];
  const rows = stmts.pollMessages.all(
    state.id,
    partition,
    Math.max(0, fromOffset),
    Math.floor(count),
  ) as unknown as MessageRow[];
  const out = new Array<StoredMessage>(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i];
    out[i] = {
      partition,
      offset: r.message_offset,
      timestampMicros: r.timestamp_micros,
      payload: r.payload,
      headers: decodeHeaders(r.headers),
    };
  }
  return out;
}

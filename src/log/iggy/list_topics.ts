/**
 * Every topic of every stream on the server (wildcard subscriptions resolve their filters
 * against them): GET_STREAMS, then GET_STREAM of each stream, decoded in the server's
 * dialect (0.9/0.11 or 0.12).
 *
 * @module
 */
import type { TopicInfo } from "../port.ts";
import { Code } from "./codes.ts";
import * as cmd from "./v11/request_bodies.ts";
import type { Dialect } from "./dialect.ts";

/** One request: what it does (for errors), its code and body, how its reply is decoded. */
export type Call = <T>(
  action: string,
  code: number,
  body: Uint8Array,
  decode: (b: Uint8Array) => T,
) => Promise<T>;

/** The topics of every stream, with their partition counts. */
export async function listTopics(call: Call, d: Dialect): Promise<TopicInfo[]> {
  const streams = await call("list streams", Code.GET_STREAMS, new Uint8Array(0), d.decodeStreams);
  const out: TopicInfo[] = [];
  for (const s of streams) {
    const details = await call(
      `read stream "${s.name}"`,
      Code.GET_STREAM,
      cmd.getStreamBody(s.name),
      d.decodeStreamDetails,
    );
    for (const t of details?.topics ?? []) {
      out.push({ stream: s.name, topic: t.name, partitions: t.partitionsCount });
    }
  }
  return out;
}

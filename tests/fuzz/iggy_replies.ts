/**
 * Fuzz of every decoder of an Iggy reply, in both dialects: reply frames a broken or hostile
 * server could send, made from the captured 0.11 frames (`tests/fixtures/iggy011/`), the 0.12
 * golden vectors (`tests/fixtures/iggy012/vectors.json`) and a few built here (consumer
 * groups, polls whose messages carry real envelopes, retained records and session records).
 *
 * Each input is one of: a mutated frame through `decodeReply` and then its command's decoder;
 * a mutated payload straight into its decoder or into another command's (a reply taken for the
 * wrong request); random bytes into any decoder; a mutated run of frames through the
 * {@link FrameReader} in random chunks. Decoders may only return or throw the client's own
 * errors (`DecodeError`, `IggyError`, `IggyConnectionError`) or a `BackendError`; anything
 * else is a crash. What a poll returns goes on through the decoders of the messages it
 * carries (envelope, MQTT 5 properties, retained records, session records), which may not
 * throw at all.
 *
 * @module
 */
import { BackendError } from "../../src/log/port.ts";
import {
  decodePollReply,
  decodeSendReply,
  encodeBatch,
  type PollReply,
  storedMessagesOf,
} from "../../src/log/iggy/batch.ts";
import { DecodeError, fromHex } from "../../src/log/iggy/bytes.ts";
import { IggyConnectionError, IggyError } from "../../src/log/iggy/codes.ts";
import { decodeMembers, decodeSync } from "../../src/log/iggy/consumer_groups.ts";
import { encodeUserHeaders } from "../../src/log/iggy/encoding.ts";
import { FrameReader } from "../../src/log/iggy/frame_reader.ts";
import { HEADER_SIZE } from "../../src/log/iggy/header_layout.ts";
import { decodeRegisterReply } from "../../src/log/iggy/login.ts";
import {
  decodeStreamDetails,
  decodeStreams,
  decodeTopic,
  decodeUser,
  nextOffsetIn,
  type TopicRecord,
} from "../../src/log/iggy/v11/records.ts";
import { decodeReply } from "../../src/log/iggy/reply.ts";
import { decodeOffsetReply } from "../../src/log/iggy/v11/request_bodies.ts";
import { decodePollReply012 } from "../../src/log/iggy/v12/deferred_poll.ts";
import {
  decodeStreamDetails012,
  decodeStreams012,
  decodeTopic012,
  decodeUser012,
} from "../../src/log/iggy/v12/records.ts";
import { decodeRoute } from "../../src/log/iggy/v12/route.ts";
import { envelope, openEnvelope } from "../../src/stored/envelope.ts";
import { readStoredProperties, storedExpiry } from "../../src/stored/envelope_v5.ts";
import { markerRecord, readRecord } from "../../src/stored/retained/retained_record.ts";
import type { StoredMessage } from "../../src/log/port.ts";
import { parseSessionRecord } from "../../src/stored/session_record.ts";
import { reply, Writer } from "../helpers/fake_iggy/wire.ts";
import { describe, hex, int, mutate, pick, type Rand, randomBytes } from "./random.ts";

/** One reply a decoder reads, and the decoder. */
interface ReplyCase {
  readonly name: string;
  readonly code: number;
  /** Header and body. */
  readonly frame: Uint8Array;
  readonly decode: (payload: Uint8Array) => unknown;
}

/** What one batch of reply inputs found. */
export interface ReplyBatchResult {
  inputs: number;
  /** Inputs refused with one of the client's own errors. */
  refused: number;
  /** Inputs decoded to a value. */
  decoded: number;
  crashes: string[];
}

/** Errors a decoder of a server reply may throw. */
export function isClientError(e: unknown): boolean {
  return e instanceof DecodeError || e instanceof IggyError || e instanceof IggyConnectionError ||
    e instanceof BackendError;
}

// ---------------------------------------------------------------------------------------------
// Decoders by command and dialect

const TARGET = { stream: "s", topic: "t", partition: 1 };

/** The message-level decoders a polled message goes through; none may throw. */
function readMessages(reply: PollReply): number {
  const messages = storedMessagesOf(reply, 0, 0, 10_000);
  for (const m of messages) readMessage(m);
  return messages.length;
}

function readMessage(m: StoredMessage): void {
  openEnvelope(m);
  readRecord(m);
  readStoredProperties(m.headers);
  storedExpiry(m.headers);
  const parsed = parseSessionRecord(new TextDecoder().decode(m.payload));
  if (parsed.kind === "session") {
    parsed.apply(
      { subscriptions: new Map(), triples: new Set(), expiryS: 0, offlineSinceMs: null },
      3600,
    );
  }
}

function topicDecoder(decode: (b: Uint8Array) => TopicRecord | null) {
  return (b: Uint8Array) => {
    const t = decode(b);
    return t === null ? null : nextOffsetIn(t, TARGET);
  };
}

/** The decoder of each command's reply payload in `dialect`. */
function decoderFor(dialect: "0.11" | "0.12", code: number): (b: Uint8Array) => unknown {
  const v12 = dialect === "0.12";
  switch (code) {
    case 15:
    case 40:
    case 45:
      return decodeRegisterReply;
    case 31:
      return v12 ? decodeUser012 : decodeUser;
    case 100:
    case 106:
      return v12
        ? (b) => readMessages(decodePollReply012(b))
        : (b) => readMessages(decodePollReply(b));
    case 101:
      return decodeSendReply;
    case 105:
      return decodeRoute;
    case 120:
      return decodeOffsetReply;
    case 200:
      return v12 ? decodeStreamDetails012 : decodeStreamDetails;
    case 201:
    case 202:
      return v12 ? decodeStreams012 : decodeStreams;
    case 300:
    case 302:
      return topicDecoder(v12 ? decodeTopic012 : decodeTopic);
    case 600:
      return decodeMembers;
    case 606:
      return decodeSync;
    default:
      return (b) => b.length; // ping, store offset, delete: the payload is not read
  }
}

// ---------------------------------------------------------------------------------------------
// The corpus

/** The 0.11 frames captured from a real server: file name to command code. */
const CAPTURED_011: Record<string, number> = {
  create_stream_reply: 202,
  create_topic_exists_reply: 302,
  create_topic_reply: 302,
  delete_stream_reply: 203,
  get_offset_none_reply: 120,
  get_offset_reply: 120,
  get_topic_missing_reply: 300,
  get_topic_reply: 300,
  get_user_root_reply: 31,
  poll_messages_reply: 100,
  poll_missing_stream_reply: 100,
  register_bad_password_eviction: 40,
  register_reply: 40,
  send_messages_reply: 101,
  store_offset_reply: 121,
};

/** Command code of each 0.12 golden reply, by the name after `reply.`. */
function code012(name: string): number {
  if (name.startsWith("send_")) return 101;
  if (name.startsWith("poll_")) return 100;
  if (name.startsWith("eviction_")) return 40;
  const codes: Record<string, number> = {
    register: 40,
    ping: 1,
    bind_session: 15,
    partition_route: 105,
    store_offset: 121,
    get_offset: 120,
    get_offset_none: 120,
    get_stream: 200,
    get_streams: 201,
    create_stream: 202,
    get_topic: 300,
    create_topic: 302,
    get_user: 31,
  };
  return codes[name] ?? 1;
}

/** A reply frame around `body` (request 1, status 0). */
function frameOf(body: Uint8Array, status = 0): Uint8Array {
  return reply({ request: 1n, operation: 0 }, { body, status });
}

/** Messages as the gateway stores them: an MQTT 5 envelope, a retained marker, a session. */
function storedBatch(): Uint8Array {
  const props = {
    payloadFormat: 1 as const,
    messageExpiry: 60,
    contentType: "text/plain",
    responseTopic: "r/t",
    correlationData: new Uint8Array([1, 2, 3]),
    userProperties: [["k", "v"] as const],
  };
  const mqtt = envelope(
    "sensors/a/data",
    new Uint8Array([104, 105]),
    1,
    "dev-1",
    7,
    true,
    false,
    props,
  );
  const marker = markerRecord({ id: "snap-1", base: 3, count: 2 });
  const session = {
    payload: new TextEncoder().encode(
      '{"v":1,"s":[["a/+",1]],"t":["s\\u0000t\\u00000"],"e":60,"o":null,"u":"alice"}',
    ),
    headers: new Map<string, string>(),
  };
  return encodeBatch([mqtt, marker, session].map((m, i) => ({
    id: BigInt(i + 1),
    payload: m.payload,
    userHeaders: encodeUserHeaders(m.headers),
    originTimestampMicros: 1_700_000_000_000_000n + BigInt(i),
  })));
}

/** Poll replies carrying {@link storedBatch}, in both dialects. */
function pollReplies(): ReplyCase[] {
  const out: ReplyCase[] = [];
  for (const dialect of ["0.11", "0.12"] as const) {
    const w = new Writer().u32(1).u64(2).u32(3);
    if (dialect === "0.12") w.u64(7).u64(0).u64(9);
    const body = new Uint8Array([...w.finish(), ...storedBatch()]);
    out.push({
      name: `${dialect} poll of envelopes`,
      code: 100,
      frame: frameOf(body),
      decode: decoderFor(dialect, 100),
    });
  }
  return out;
}

/** Consumer group replies (0.11 only: the 0.12 dialect has no consumer groups). */
function groupReplies(): ReplyCase[] {
  const sync = new Writer().u64(4).u32(3).u32(0).u32(2).u32(1).finish();
  const members = new Writer().u32(1).u32(3).u32(2).name("mqtt-share-g").u32(7).u32(2).u32(0).u32(2)
    .finish();
  return [
    { name: "0.11 sync group", code: 606, frame: frameOf(sync), decode: decodeSync },
    { name: "0.11 get group", code: 600, frame: frameOf(members), decode: decodeMembers },
  ];
}

let corpusCache: ReplyCase[] | undefined;

/** Every reply of the corpus (built once per process). */
export function replyCorpus(): ReplyCase[] {
  if (corpusCache) return corpusCache;
  const out: ReplyCase[] = [];
  for (const [file, code] of Object.entries(CAPTURED_011)) {
    const url = new URL(`../fixtures/iggy011/${file}.hex`, import.meta.url);
    out.push({
      name: `0.11 ${file}`,
      code,
      frame: fromHex(Deno.readTextFileSync(url)),
      decode: decoderFor("0.11", code),
    });
  }
  const vectors = JSON.parse(
    Deno.readTextFileSync(new URL("../fixtures/iggy012/vectors.json", import.meta.url)),
  ) as { frames: Record<string, string> };
  for (const [key, value] of Object.entries(vectors.frames)) {
    if (!key.startsWith("reply.")) continue;
    const code = code012(key.slice("reply.".length));
    out.push({
      name: `0.12 ${key}`,
      code,
      frame: fromHex(value),
      decode: decoderFor("0.12", code),
    });
  }
  out.push(...pollReplies(), ...groupReplies());
  corpusCache = out;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Inputs

/** Runs `f`; a value or a client error is fine, anything else is a crash. */
function expectClientErrors(
  res: ReplyBatchResult,
  what: string,
  input: Uint8Array,
  f: () => unknown,
): void {
  res.inputs++;
  try {
    f();
    res.decoded++;
  } catch (e) {
    if (isClientError(e)) res.refused++;
    else res.crashes.push(`${what}: ${describe(e)} bytes=${hex(input)}`);
  }
}

/** A mutated frame through decodeReply and its command's decoder. */
function frameInput(r: Rand, c: ReplyCase, frames: Uint8Array[], res: ReplyBatchResult): void {
  const f = mutate(r, c.frame, frames);
  // A frame shorter than its header never leaves the frame reader: pad it as the reader would
  // wait for more.
  const frame = f.length >= HEADER_SIZE
    ? f
    : new Uint8Array([...f, ...new Uint8Array(HEADER_SIZE - f.length)]);
  expectClientErrors(res, `decodeReply+${c.name}`, frame, () => {
    const payload = decodeReply(
      frame.subarray(0, HEADER_SIZE),
      frame.subarray(HEADER_SIZE),
      c.code,
    );
    return c.decode(payload);
  });
}

/** The valid payload of a case, or null when the case is a refusal. */
function payloadOf(c: ReplyCase): Uint8Array | null {
  try {
    return decodeReply(c.frame.subarray(0, HEADER_SIZE), c.frame.subarray(HEADER_SIZE), c.code);
  } catch {
    return null;
  }
}

/** A mutated payload into its decoder, or into another command's. */
function payloadInput(r: Rand, corpus: ReplyCase[], res: ReplyBatchResult): void {
  const c = pick(r, corpus);
  const payload = payloadOf(c) ?? c.frame.subarray(HEADER_SIZE);
  const decoder = r() < 0.25 ? pick(r, corpus) : c;
  const bodies = corpus.map((x) => x.frame.subarray(HEADER_SIZE));
  const input = r() < 0.1 ? payload : mutate(r, payload, bodies);
  expectClientErrors(res, `${decoder.name} decoder`, input, () => decoder.decode(input));
}

/** A run of frames, some mutated, cut into random chunks, through the frame reader. */
async function streamInput(r: Rand, corpus: ReplyCase[], res: ReplyBatchResult): Promise<void> {
  const frames = corpus.map((c) => c.frame);
  const parts: Uint8Array[] = [];
  for (let k = 1 + int(r, 4); k > 0; k--) {
    const f = pick(r, frames);
    parts.push(r() < 0.5 ? mutate(r, f, frames) : f);
  }
  const stream = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    stream.set(p, at);
    at += p.length;
  }
  let pos = 0;
  const transport = {
    readable: new ReadableStream<Uint8Array>(),
    read(into: Uint8Array): Promise<number | null> {
      if (pos >= stream.length) return Promise.resolve(null);
      const n = Math.min(into.length, 1 + int(r, stream.length - pos), stream.length - pos);
      into.set(stream.subarray(pos, pos + n));
      pos += n;
      return Promise.resolve(n);
    },
  };
  res.inputs++;
  const delivered: string[] = [];
  try {
    await new FrameReader(transport, (f) => {
      if (f.header.length !== HEADER_SIZE) delivered.push(`header of ${f.header.length} bytes`);
    }, "fuzz").run();
    res.decoded++;
  } catch (e) {
    if (e instanceof IggyConnectionError) res.refused++;
    else res.crashes.push(`FrameReader: ${describe(e)} bytes=${hex(stream)}`);
  }
  for (const d of delivered) res.crashes.push(`FrameReader delivered a ${d} bytes=${hex(stream)}`);
}

/** Runs `count` reply inputs from `r`. */
export async function runReplyInputs(r: Rand, count: number): Promise<ReplyBatchResult> {
  const corpus = replyCorpus();
  const frames = corpus.map((c) => c.frame);
  const res: ReplyBatchResult = { inputs: 0, refused: 0, decoded: 0, crashes: [] };
  for (let i = 0; i < count; i++) {
    const choice = r();
    if (choice < 0.45) frameInput(r, pick(r, corpus), frames, res);
    else if (choice < 0.8) payloadInput(r, corpus, res);
    else if (choice < 0.9) {
      const c = pick(r, corpus);
      const input = randomBytes(r, int(r, 2) ? int(r, 64) : int(r, 600));
      expectClientErrors(res, `${c.name} decoder (random)`, input, () => c.decode(input));
    } else await streamInput(r, corpus, res);
  }
  return res;
}

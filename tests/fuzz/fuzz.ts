/**
 * Coverage-less mutation fuzzer for the MQTT codec and the live gateway.
 *
 * Valid packets of a seed corpus (made with mqtt-packet, the oracle) are mutated with bit
 * flips, byte inserts and deletes, interesting bytes, remaining-length and string-length
 * tweaks, truncation and splices, and fed
 *  (a) to {@link PacketDecoder} directly, in a child process watched by a timer: it may only return
 *      packets (which must respect the decoder's own invariants) or throw `ProtocolError`;
 *      any other exception is a crash, a batch that does not finish in time is a hang;
 *  (b) over real sockets to a live gateway (in-process unless `port` is given), in bounded
 *      parallel connections, raw TCP and WebSocket (`ws_frames.ts`: mutated frames carrying the
 *      same inputs); after each batch a witness client must still get its PUBACK.
 *      Exceptions the gateway swallowed as "Connection read failed" that are not socket
 *      errors, and unhandled rejections, count as crashes.
 * In the same child process as (a), batch by batch:
 *  (c) every decoder of an Iggy reply, both dialects (`iggy_replies.ts`);
 *  (d) the config and topic-map loaders (`loaders.ts`).
 * And beside them:
 *  (e) rounds against a hostile Iggy (`hostile_iggy.ts`): gateways in Iggy mode and in forward
 *      mode, both dialects, behind a proxy that corrupts reply frames; a witness must get its
 *      PUBACK after every batch and every PUBACKed message must reach Iggy.
 *
 * Run: `deno task fuzz --seconds 600 --seed 42` (`--only replies,loaders` runs some of
 * decoder, replies, loaders, sockets, ws, hostile). Everything in the child process is
 * reproducible from the seed: batch `n` of each target is generated from `(seed, n)` alone;
 * `--reproduce replies:17` runs that one batch again and prints what it found. The socket and
 * hostile rounds are seeded too, but timing decides which input meets which state.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import mqttPacket from "mqtt-packet";
import { type DecoderLimits, PacketDecoder } from "../../src/codec/decoder.ts";
import { ProtocolError } from "../../src/codec/errors.ts";
import type { ClientPacket } from "../../src/codec/packets.ts";
import { remainingLength as varint } from "../../src/codec/encoder.ts";
import { concatBytes } from "../../src/base/bytes.ts";
import { batchRng, hex, int, INTERESTING, pick, type Rand, rng } from "./random.ts";
import { type ReplyBatchResult, runReplyInputs } from "./iggy_replies.ts";
import { type LoaderBatchResult, runLoaderInputs } from "./loaders.ts";
import { makeWsInput, sendWsInput } from "./ws_frames.ts";
import { hostileRound, SETUPS } from "./hostile_iggy.ts";

/** Figures of one fuzz run. */
export interface FuzzReport {
  seconds: number;
  seed: number;
  /** Every input: (a) to (d), and the reply frames the hostile proxy passed on in (e). */
  inputs: number;
  decoderInputs: number;
  /** MQTT inputs over TCP, and over WebSocket frames, in (b). */
  socketInputs: number;
  wsInputs: number;
  /** Reply inputs in (c); how many a decoder refused with the client's own errors. */
  replyInputs: number;
  replyRefusals: number;
  /** Loader inputs in (d); how many were refused with a one-line ConfigError or MapError. */
  loaderInputs: number;
  loaderRefusals: number;
  /** Hostile rounds and batches in (e), reply frames passed on and corrupted. */
  hostileRounds: number;
  hostileBatches: number;
  hostileFrames: number;
  hostileCorrupted: number;
  /** Messages PUBACKed in (e), each found in Iggy afterwards (else a finding). */
  hostileAcked: number;
  /** ProtocolErrors thrown by the decoder in (a), plus protocol errors the gateway counted in (b). */
  protocolErrors: number;
  decoderProtocolErrors: number;
  gatewayProtocolErrors: number;
  /** Packets the decoder returned in (a). */
  packets: number;
  crashes: number;
  hangs: number;
  witnessAcks: number;
  /** Distinct findings (by signature) with a count and one example to reproduce them. */
  findings: Record<string, { count: number; example: string }>;
}

/** Options of {@link fuzz}. */
export interface FuzzOptions {
  readonly seconds: number;
  readonly seed: number;
  /** Fuzz an already running gateway on 127.0.0.1:port instead of an in-process one. */
  readonly port?: number;
  /** What to fuzz (default: all). */
  readonly only?: readonly FuzzTarget[];
  /** Fraction of reply frames the hostile Iggy corrupts in (e) (default 0.2). */
  readonly corruptRate?: number;
}

/** The parts of a run: (a) to (e) of the module doc, (b) split by transport. */
export const TARGETS = ["decoder", "replies", "loaders", "sockets", "ws", "hostile"] as const;
export type FuzzTarget = typeof TARGETS[number];

/** The targets that run in the child process, with their batch sizes. */
const CHILD_TARGETS = { decoder: 2000, replies: 2000, loaders: 300 } as const;
type ChildTarget = keyof typeof CHILD_TARGETS;

const DEFAULT_LIMITS: DecoderLimits = {
  maxPacketBytes: 8092,
  maxTopicBytes: 255,
  maxTopicLevels: 32,
  maxUserProperties: 32,
  topicAliasMaximum: 16,
};
const SMALL_LIMITS: DecoderLimits = {
  maxPacketBytes: 64,
  maxTopicBytes: 16,
  maxTopicLevels: 3,
  maxUserProperties: 1,
  topicAliasMaximum: 1,
};
const DECODER_BATCH = 2000;
const DECODER_BATCH_TIMEOUT_MS = 10_000;
const SOCKET_BATCH = 64;
const SOCKET_PARALLEL = 16;
const MAX_FAILURES = 20;

// ---------------------------------------------------------------------------------------------
// Random numbers and the corpus

function gen(p: Record<string, unknown>, protocolVersion = 4): Uint8Array {
  return new Uint8Array(
    mqttPacket.generate(p as unknown as mqttPacket.Packet, { protocolVersion }),
  );
}

/** The valid CONNECT every socket input starts with (unless the CONNECT itself is mutated). */
function baseConnect(clientId: string): Uint8Array {
  return gen({
    cmd: "connect",
    protocolId: "MQTT",
    protocolVersion: 4,
    clientId,
    clean: true,
    keepalive: 30,
  });
}

/** The material mutations start from: MQTT 3.1.1 and MQTT 5 connects and packets. */
interface Corpus {
  connects: Uint8Array[];
  packets: Uint8Array[];
  connects5: Uint8Array[];
  packets5: Uint8Array[];
}

/** Valid packets of every type (client and server), the material mutations start from. */
function buildCorpus(): Corpus {
  corpusCache ??= { ...makeCorpus(), ...makeCorpus5() };
  return corpusCache;
}
let corpusCache: Corpus | undefined;

/** MQTT 5: connects with properties and a will, packets with properties and topic aliases. */
function makeCorpus5(): { connects5: Uint8Array[]; packets5: Uint8Array[] } {
  const g = (p: Record<string, unknown>) => gen(p, 5);
  const connect = (o: Record<string, unknown>) =>
    g({ cmd: "connect", protocolId: "MQTT", protocolVersion: 5, clean: true, keepalive: 60, ...o });
  const connects5 = [
    connect({ clientId: "fz5" }),
    connect({
      clientId: "fz5-p",
      properties: {
        sessionExpiryInterval: 10,
        receiveMaximum: 3,
        maximumPacketSize: 500,
        topicAliasMaximum: 4,
        requestProblemInformation: false,
        userProperties: { a: "b" },
      },
      will: {
        topic: "w/t",
        payload: Buffer.from("x"),
        qos: 1,
        retain: false,
        properties: { willDelayInterval: 1, payloadFormatIndicator: true, contentType: "t" },
      },
    }),
  ];
  const props = {
    payloadFormatIndicator: true,
    messageExpiryInterval: 5,
    contentType: "text/plain",
    responseTopic: "r/t",
    correlationData: Buffer.from([1, 2]),
    userProperties: { k: ["v1", "v2"] },
  };
  const packets5 = [
    g({
      cmd: "publish",
      topic: "sensors/a/data",
      payload: Buffer.from("x"),
      qos: 1,
      messageId: 3,
      properties: props,
    }),
    g({
      cmd: "publish",
      topic: "sensors/b/data",
      payload: Buffer.from("y"),
      qos: 0,
      properties: { topicAlias: 1 },
    }),
    g({
      cmd: "publish",
      topic: "",
      payload: Buffer.from("z"),
      qos: 0,
      properties: { topicAlias: 1 },
    }),
    g({ cmd: "puback", messageId: 1, reasonCode: 0x10, properties: { reasonString: "r" } }),
    g({
      cmd: "subscribe",
      messageId: 4,
      properties: { subscriptionIdentifier: 9, userProperties: { u: "1" } },
      subscriptions: [{ topic: "sensors/a/data", qos: 1, nl: true, rap: true, rh: 2 }],
    }),
    g({ cmd: "unsubscribe", messageId: 5, unsubscriptions: ["sensors/a/data"] }),
    g({ cmd: "disconnect", reasonCode: 4, properties: { reasonString: "bye" } }),
    g({ cmd: "auth", reasonCode: 0x18, properties: { authenticationMethod: "x" } }),
    g({ cmd: "pingreq" }),
  ];
  return { connects5, packets5 };
}

function makeCorpus(): { connects: Uint8Array[]; packets: Uint8Array[] } {
  const connect = (o: Record<string, unknown>) =>
    gen({
      cmd: "connect",
      protocolId: "MQTT",
      protocolVersion: 4,
      clean: true,
      keepalive: 60,
      ...o,
    });
  const connects = [
    connect({ clientId: "fz" }),
    connect({ clientId: "" }),
    connect({ clientId: "fz-u", username: "alice", password: Buffer.from([1, 2, 3]) }),
    connect({
      clientId: "fz-w",
      will: { topic: "w/t", payload: Buffer.from([7]), qos: 1, retain: true },
    }),
    connect({ clientId: "fz-c", clean: false, keepalive: 0 }),
    gen({
      cmd: "connect",
      protocolId: "MQIsdp",
      protocolVersion: 3,
      clientId: "old",
      clean: true,
      keepalive: 5,
    }),
  ];
  const payload = (n: number) => Buffer.from(new Uint8Array(n).map((_, i) => i & 0xff));
  const packets = [
    gen({ cmd: "publish", topic: "sensors/a/data", payload: payload(3), qos: 0 }),
    gen({ cmd: "publish", topic: "sensors/a/data", payload: payload(0), qos: 1, messageId: 7 }),
    gen({
      cmd: "publish",
      topic: "building/n/room/1/t",
      payload: payload(200),
      qos: 1,
      messageId: 65535,
      retain: true,
    }),
    gen({ cmd: "publish", topic: "é/ü/€/𝄞", payload: payload(1), qos: 1, messageId: 2, dup: true }),
    gen({ cmd: "publish", topic: "a/".repeat(40) + "z", payload: payload(130), qos: 0 }),
    gen({ cmd: "puback", messageId: 1 }),
    gen({ cmd: "subscribe", messageId: 3, subscriptions: [{ topic: "sensors/a/data", qos: 1 }] }),
    gen({
      cmd: "subscribe",
      messageId: 4,
      subscriptions: [{ topic: "x", qos: 0 }, { topic: "y/#", qos: 2 }],
    }),
    gen({ cmd: "unsubscribe", messageId: 5, unsubscriptions: ["sensors/a/data", "x"] }),
    gen({ cmd: "pingreq" }),
    gen({ cmd: "disconnect" }),
    gen({ cmd: "connack", returnCode: 0, sessionPresent: false }),
    gen({ cmd: "suback", messageId: 3, granted: [1, 0x80] }),
    gen({ cmd: "unsuback", messageId: 5 }),
    gen({ cmd: "pingresp" }),
    gen({ cmd: "pubrec", messageId: 9 }),
    gen({ cmd: "pubrel", messageId: 9 }),
    gen({ cmd: "pubcomp", messageId: 9 }),
  ];
  return { connects, packets };
}

// ---------------------------------------------------------------------------------------------
// Mutations

/** Rewrites the remaining length of a packet at offset 0 (keeping the body). */
function tweakRemainingLength(r: Rand, b: Uint8Array): Uint8Array {
  let i = 1;
  while (i < b.length && i < 5 && (b[i] & 0x80) !== 0) i++;
  const bodyStart = Math.min(i + 1, b.length);
  const real = b.length - bodyStart;
  const choice = int(r, 6);
  let head: number[];
  if (choice === 0) head = varint(Math.max(0, real - 1 - int(r, 3)));
  else if (choice === 1) head = varint(real + 1 + int(r, 3));
  else if (choice === 2) head = varint(int(r, 268_435_456));
  else if (choice === 3) head = [0xff, 0xff, 0xff, 0xff, 0x7f]; // 5-byte varint
  else if (choice === 4) head = [0x80 | (real & 0x7f), 0x80, 0x00]; // non-minimal encoding
  else head = varint(8093 + int(r, 100)); // just above max_packet_bytes
  const out = new Uint8Array(1 + head.length + real);
  out[0] = b[0];
  out.set(head, 1);
  out.set(b.subarray(bodyStart), 1 + head.length);
  return out;
}

/** Overwrites a 16-bit big-endian field (string length, packet id) somewhere in the body. */
function tweakU16(r: Rand, b: Uint8Array): Uint8Array {
  if (b.length < 4) return b;
  const out = b.slice();
  const at = 2 + int(r, out.length - 3);
  const v = pick(r, [
    0,
    1,
    0xffff,
    0x8000,
    (out[at] << 8 | out[at + 1]) + 1,
    (out[at] << 8 | out[at + 1]) - 1,
  ]);
  out[at] = (v >> 8) & 0xff;
  out[at + 1] = v & 0xff;
  return out;
}

/** One random mutation of `b`; `other` is splice material. */
function mutateOnce(r: Rand, b: Uint8Array, other: Uint8Array): Uint8Array {
  switch (int(r, 10)) {
    case 0: { // bit flips
      const out = b.slice();
      for (let k = 1 + int(r, 3); k > 0 && out.length > 0; k--) {
        out[int(r, out.length)] ^= 1 << int(r, 8);
      }
      return out;
    }
    case 1: { // interesting byte
      const out = b.slice();
      if (out.length > 0) out[int(r, out.length)] = pick(r, INTERESTING);
      return out;
    }
    case 2: { // insert bytes
      const at = int(r, b.length + 1);
      const ins = new Uint8Array(1 + int(r, 4)).map(() =>
        int(r, 2) ? int(r, 256) : pick(r, INTERESTING)
      );
      return concatBytes([b.subarray(0, at), ins, b.subarray(at)]);
    }
    case 3: { // delete a range
      if (b.length === 0) return b;
      const at = int(r, b.length);
      const n = 1 + int(r, Math.min(8, b.length - at));
      return concatBytes([b.subarray(0, at), b.subarray(at + n)]);
    }
    case 4:
      return tweakRemainingLength(r, b);
    case 5:
      return tweakU16(r, b);
    case 6: // truncate
      return b.subarray(0, int(r, b.length + 1));
    case 7: // splice: head of one, tail of another
      return concatBytes([
        b.subarray(0, int(r, b.length + 1)),
        other.subarray(int(r, other.length + 1)),
      ]);
    case 8: { // first byte: type and flags
      const out = b.slice();
      if (out.length > 0) out[0] = int(r, 2) ? (out[0] & 0xf0) | int(r, 16) : int(r, 256);
      return out;
    }
    default: { // duplicate a range in place
      if (b.length === 0) return b;
      const at = int(r, b.length);
      const n = 1 + int(r, Math.min(16, b.length - at));
      return concatBytes([b.subarray(0, at + n), b.subarray(at, at + n), b.subarray(at + n)]);
    }
  }
}

function mutate(r: Rand, b: Uint8Array, corpus: readonly Uint8Array[]): Uint8Array {
  let out = b;
  for (let k = 1 + int(r, 3); k > 0; k--) out = mutateOnce(r, out, pick(r, corpus));
  return out;
}

/**
 * One fuzz input: usually a valid CONNECT followed by 1–4 packets of which some are mutated;
 * sometimes the CONNECT itself is mutated.
 */
function makeInput(r: Rand, corpus: Corpus, clientId: string): Uint8Array {
  // Two inputs in five speak MQTT 5 (a v5 CONNECT, then mostly v5 packets).
  const v5 = r() < 0.4;
  const connects = v5 ? corpus.connects5 : corpus.connects;
  const packets = v5 ? [...corpus.packets5, ...corpus.packets] : corpus.packets;
  const all = [...connects, ...packets];
  const parts: Uint8Array[] = [];
  if (r() < 0.2) parts.push(mutate(r, pick(r, connects), all));
  else parts.push(r() < 0.5 && !v5 ? baseConnect(clientId) : pick(r, connects));
  for (let k = 1 + int(r, 4); k > 0; k--) {
    const p = v5 && r() < 0.7 ? pick(r, corpus.packets5) : pick(r, packets);
    parts.push(r() < 0.7 ? mutate(r, p, all) : p);
  }
  return concatBytes(parts);
}

// ---------------------------------------------------------------------------------------------
// (a) The decoder, in a child process

interface DecoderBatchResult {
  inputs: number;
  protocolErrors: number;
  packets: number;
  crashes: string[];
}

/** Checks the promises a decoded packet makes to the rest of the gateway. */
function checkPacket(p: ClientPacket, limits: DecoderLimits, first: boolean): string | null {
  const bad = (s: string) =>
    `invariant: ${s}: ${JSON.stringify(p, (_k, v) => v instanceof Uint8Array ? [...v] : v)}`;
  if ((p.type === "connect" || p.type === "connect_unsupported") !== first) {
    return bad("CONNECT not first/only");
  }
  switch (p.type) {
    case "publish": {
      const bytes = new TextEncoder().encode(p.topic).length;
      if (p.topic.length === 0 || bytes > limits.maxTopicBytes) return bad("topic length");
      if (/[#+]/.test(p.topic) || p.topic.includes("\0")) return bad("topic characters");
      if (p.topic.split("/").length > limits.maxTopicLevels) return bad("topic levels");
      if (p.qos > 0 ? p.packetId < 1 || p.packetId > 0xffff : p.packetId !== 0 || p.dup) {
        return bad("qos/id/dup");
      }
      return null;
    }
    case "puback":
    case "pubrec":
    case "pubrel":
    case "pubcomp":
      return p.packetId >= 1 && p.packetId <= 0xffff ? null : bad("packet id");
    case "subscribe":
      if (p.packetId === 0 || p.subscriptions.length === 0) return bad("id or filters");
      return p.subscriptions.every((s) => s.qos <= 2) ? null : bad("qos");
    case "unsubscribe":
      return p.packetId !== 0 && p.filters.length > 0 ? null : bad("id or filters");
    default:
      return null;
  }
}

/** Runs decoder batch `batch` of `seed`: every input is generated from (seed, batch) alone. */
export function runDecoderBatch(
  seed: number,
  batch: number,
  count = DECODER_BATCH,
): DecoderBatchResult {
  const r = rng((seed * 0x9e3779b1 + batch * 0x85ebca6b) >>> 0);
  const corpus = buildCorpus();
  const res: DecoderBatchResult = { inputs: 0, protocolErrors: 0, packets: 0, crashes: [] };
  for (let i = 0; i < count; i++) {
    const input = makeInput(r, corpus, "fz");
    const limits = r() < 0.8 ? DEFAULT_LIMITS : SMALL_LIMITS;
    const d = new PacketDecoder(limits);
    res.inputs++;
    // Random chunking: the decoder must not care where reads split.
    let at = 0;
    let first = true;
    try {
      while (at < input.length) {
        const n = r() < 0.5 ? input.length - at : 1 + int(r, input.length - at);
        const chunk = input.slice(at, at + n);
        at += n;
        for (const p of d.push(chunk)) {
          res.packets++;
          const problem = checkPacket(p, limits, first);
          first = false;
          if (problem !== null) throw new Error(problem);
        }
        if (d.bufferedBytes > limits.maxPacketBytes + 5 + n) {
          throw new Error("invariant: buffer unbounded");
        }
      }
    } catch (err) {
      if (err instanceof ProtocolError) {
        res.protocolErrors++;
        if (typeof err.rule !== "string" || !err.rule.startsWith("MQTT-")) {
          res.crashes.push(`ProtocolError without a rule id: ${err.message}`);
        }
      } else {
        res.crashes.push(
          `${String(err)} (seed ${seed} batch ${batch} input ${i}) bytes=${hex(input)}`,
        );
      }
    }
  }
  return res;
}

/** What one batch of the child process found, per target. */
interface ChildBatchResult {
  batch: number;
  decoder?: DecoderBatchResult;
  replies?: ReplyBatchResult;
  loaders?: LoaderBatchResult;
}

/** Resident memory above which a batch counts as allocating absurdly (a length taken as is). */
const CHILD_RSS_LIMIT = 1024 * 1024 * 1024;

/** Batch `batch` of the child `targets` under `seed`. */
async function runChildBatch(
  seed: number,
  batch: number,
  targets: readonly ChildTarget[],
): Promise<ChildBatchResult> {
  const out: ChildBatchResult = { batch };
  if (targets.includes("decoder")) out.decoder = runDecoderBatch(seed, batch);
  if (targets.includes("replies")) {
    const r = batchRng(seed, 1, batch);
    out.replies = await runReplyInputs(r, CHILD_TARGETS.replies);
    label(out.replies.crashes, `replies:${batch}`);
  }
  if (targets.includes("loaders")) {
    out.loaders = runLoaderInputs(batchRng(seed, 2, batch), CHILD_TARGETS.loaders);
    label(out.loaders.crashes, `loaders:${batch}`);
  }
  const rss = Deno.memoryUsage().rss;
  if (rss > CHILD_RSS_LIMIT) {
    (out.replies ?? out.loaders ?? out.decoder)?.crashes.push(
      `memory: the child holds ${
        Math.round(rss / 2 ** 20)
      } MiB after batch ${batch} (seed ${seed})`,
    );
  }
  return out;
}

/** Names the batch a crash came from (`--reproduce target:batch`) before its input. */
function label(crashes: string[], where: string): void {
  for (let i = 0; i < crashes.length; i++) {
    crashes[i] = crashes[i].replace(/ (bytes|input)=/, ` (--reproduce ${where}) $1=`);
  }
}

/**
 * Batches from `from` on, one JSON line per batch on stdout, until `until` (epoch ms).
 * Runs in a child process so that a hang can be detected and killed (a Worker cannot be used:
 * under `deno test` of Deno 2.9.6 a Worker never receives its messages).
 */
async function runChild(
  seed: number,
  from: number,
  until: number,
  targets: readonly ChildTarget[],
): Promise<void> {
  const out = new TextEncoder();
  for (let batch = from; Date.now() < until; batch++) {
    const line = JSON.stringify(await runChildBatch(seed, batch, targets)) + "\n";
    const bytes = out.encode(line);
    let off = 0;
    while (off < bytes.length) off += Deno.stdout.writeSync(bytes.subarray(off));
  }
}

/** Adds one batch line of the child to the report. */
function addChildBatch(report: FuzzReport, result: ChildBatchResult): void {
  const d = result.decoder;
  if (d) {
    report.decoderInputs += d.inputs;
    report.decoderProtocolErrors += d.protocolErrors;
    report.packets += d.packets;
    report.crashes += d.crashes.length;
    for (const c of d.crashes) {
      fail(report, `decoder crash: ${c}`, `decoder crash: ${c.replace(/ \(seed.*$/, "")}`);
    }
  }
  for (const [name, r] of [["reply", result.replies], ["loader", result.loaders]] as const) {
    if (!r) continue;
    if (name === "reply") {
      report.replyInputs += r.inputs;
      report.replyRefusals += r.refused;
    } else {
      report.loaderInputs += r.inputs;
      report.loaderRefusals += r.refused;
    }
    report.crashes += r.crashes.length;
    for (const c of r.crashes) fail(report, `${name} crash: ${c}`);
  }
}

/** Runs the child targets' batches in a child process until `deadline`; a silent batch is a hang. */
async function fuzzInChild(
  seed: number,
  deadline: number,
  targets: readonly ChildTarget[],
  report: FuzzReport,
): Promise<void> {
  let next = 0;
  while (Date.now() < deadline) {
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        new URL(import.meta.url).pathname,
        "--child",
        targets.join(","),
        "--seed",
        String(seed),
        "--from",
        String(next),
        "--until",
        String(deadline),
      ],
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const stderr = new Response(child.stderr).text();
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let pending = "";
    let hung = false;
    for (;;) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const r = await Promise.race([
        reader.read(),
        new Promise<"hang">((res) =>
          timer = setTimeout(() => res("hang"), DECODER_BATCH_TIMEOUT_MS)
        ),
      ]);
      clearTimeout(timer);
      if (r === "hang") {
        hung = true;
        break;
      }
      if (r.done) break;
      pending += r.value;
      let nl: number;
      while ((nl = pending.indexOf("\n")) >= 0) {
        const result = JSON.parse(pending.slice(0, nl)) as ChildBatchResult;
        pending = pending.slice(nl + 1);
        next = result.batch + 1;
        addChildBatch(report, result);
      }
    }
    if (hung) {
      try {
        child.kill("SIGKILL");
      } catch { /* gone */ }
    }
    reader.cancel().catch(() => {});
    const status = await child.status;
    const err = await stderr;
    const again = targets.map((t) => `--reproduce ${t}:${next}`).join(" or ");
    if (hung) {
      report.hangs++;
      fail(report, `hang: seed ${seed} batch ${next} (${again})`);
      next++; // skip the batch that hung
    } else if (!status.success) {
      report.crashes++;
      fail(
        report,
        `child process died at seed ${seed} batch ${next} (${again}): ${err.slice(-500)}`,
      );
      next++;
    }
  }
}

/** Records a finding once per distinct signature (the text before any input bytes or time). */
function fail(
  report: FuzzReport,
  msg: string,
  signature = msg.replace(/ \(--reproduce [^)]*\)/, "").replace(/ (bytes|input)=.*$/s, ""),
): void {
  const seen = report.findings[signature];
  if (seen) seen.count++;
  else if (Object.keys(report.findings).length < MAX_FAILURES) {
    report.findings[signature] = { count: 1, example: msg };
  }
}

// ---------------------------------------------------------------------------------------------
// (b) The live gateway, over sockets

/** Sends one input on a fresh connection; ends with a half-close or a short wait for the peer. */
async function sendInput(port: number, input: Uint8Array, r: Rand): Promise<void> {
  let conn: Deno.TcpConn;
  try {
    conn = await Deno.connect({ hostname: "127.0.0.1", port });
  } catch {
    return; // listener busy: not a gateway failure by itself; the witness decides
  }
  const cuts = [0, ...Array.from({ length: int(r, 3) }, () => int(r, input.length)), input.length]
    .sort((a, b) => a - b);
  const halfClose = r() < 0.5;
  const drain = (async () => {
    const buf = new Uint8Array(4096);
    try {
      while ((await conn.read(buf)) !== null) { /* replies are not checked here */ }
    } catch { /* reset by peer */ }
  })();
  try {
    for (let k = 0; k + 1 < cuts.length; k++) {
      let off = cuts[k];
      while (off < cuts[k + 1]) off += await conn.write(input.subarray(off, cuts[k + 1]));
    }
    if (halfClose) await conn.closeWrite();
  } catch { /* peer closed first: the usual outcome of a bad packet */ }
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    drain,
    new Promise((res) => timer = setTimeout(res, halfClose ? 2000 : 100)),
  ]);
  clearTimeout(timer);
  try {
    conn.close();
  } catch { /* closed */ }
  await drain;
}

/** Lines the gateway logs for an exception that is neither a protocol error nor a socket error. */
function scanLogs(logs: string[], report: FuzzReport): void {
  for (const line of logs.splice(0)) {
    if (!line.includes("Connection read failed") && !line.includes('"level":"error"')) continue;
    if (
      /os error|reset|broken pipe|EPIPE|Bad resource|closed|interrupted|unexpected eof/i.test(line)
    ) continue;
    report.crashes++;
    let signature = line;
    try {
      const j = JSON.parse(line);
      signature = `gateway: ${j.msg}: ${j.error ?? ""}`;
    } catch { /* not JSON: keep the line */ }
    fail(report, `gateway: ${line.slice(0, 500)}`, signature);
  }
}

/** Sum of a labelled counter's values. */
function total(values: Map<string, number>): number {
  let n = 0;
  for (const v of values.values()) n += v;
  return n;
}

/** One socket input: MQTT bytes, over TCP or inside WebSocket frames. */
interface SocketInput {
  readonly bytes: Uint8Array;
  readonly ws: boolean;
}

async function fuzzSockets(
  o: FuzzOptions,
  deadline: number,
  report: FuzzReport,
  transports: { tcp: boolean; ws: boolean },
): Promise<void> {
  const { connectRaw, publishPacket, startGateway } = await import("../helpers/gateway.ts");
  // The failed-login backoff (up to auth.failure_backoff_max_ms per CONNECT from one source)
  // would hold mutated CONNECTs with usernames open for seconds: off, as in malformed_test.
  // Its packet limit is the in-process decoder's (DEFAULT_LIMITS), so "just above" means the same.
  const gw = o.port === undefined
    ? await startGateway({
      env: {
        IGGY_MQTT_AUTH_FAILURE_BACKOFF_MS: "0",
        IGGY_MQTT_LIMITS_MAX_PACKET_BYTES: "8092",
        IGGY_MQTT_LISTENERS_WS: transports.ws ? "127.0.0.1:0" : "",
      },
    })
    : null;
  const port = o.port ?? gw!.port;
  const wsPort = gw?.wsPort ?? null;
  const errorsAtStart = gw ? total(gw.view.metrics.protocolErrors.values) : 0;
  const r = rng(o.seed ^ 0x5bd1e995);
  const corpus = buildCorpus();
  const witness = await connectRaw(port, "fuzz-witness");
  let id = 0;
  try {
    for (let batch = 0; Date.now() < deadline; batch++) {
      const inputs = Array.from({ length: SOCKET_BATCH }, (_, i): SocketInput => {
        const mqtt = makeInput(r, corpus, `fz-${batch}-${i}`);
        // One input in four goes over WebSocket (all of them when only ws is fuzzed).
        const ws = wsPort !== null && (!transports.tcp || r() < 0.25);
        return ws ? { bytes: makeWsInput(r, mqtt), ws } : { bytes: mqtt, ws };
      });
      const seeds = inputs.map(() => int(r, 2 ** 31));
      let next = 0;
      await Promise.all(Array.from({ length: SOCKET_PARALLEL }, async () => {
        while (next < inputs.length) {
          const k = next++;
          if (inputs[k].ws) {
            const status = await sendWsInput(wsPort!, inputs[k].bytes, rng(seeds[k]));
            report.wsInputs++;
            if (/^HTTP\/1\.1 5/.test(status)) {
              report.crashes++;
              fail(report, `WebSocket listener answered "${status}" (its handler threw)`);
            }
          } else {
            await sendInput(port, inputs[k].bytes, rng(seeds[k]));
            report.socketInputs++;
          }
        }
      }));
      id = id % 65535 + 1;
      await witness.send(publishPacket("sensors/fuzz/data", `batch ${batch}`, 1, id));
      const ack = await witness.readPacket(5000);
      if (ack === null || ack[0] !== 0x40 || ((ack[2] << 8) | ack[3]) !== id) {
        report.crashes++;
        fail(report, `witness got no PUBACK after socket batch ${batch} (seed ${o.seed})`);
        return;
      }
      report.witnessAcks++;
      if (gw) scanLogs(gw.logs, report);
    }
  } finally {
    witness.close();
    if (gw) {
      // Every fuzz connection is closed on our side: none may stay open in the gateway.
      const until = Date.now() + 3000;
      while (gw.view.connections > 0 && Date.now() < until) {
        await new Promise((res) => setTimeout(res, 20));
      }
      if (gw.view.connections > 0) {
        report.crashes++;
        fail(report, `gateway kept ${gw.view.connections} connections open after the run`);
      }
      scanLogs(gw.logs, report);
      report.gatewayProtocolErrors = total(gw.view.metrics.protocolErrors.values) -
        errorsAtStart;
      await gw.stop();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// (e) A hostile Iggy

/**
 * Hostile rounds until `deadline`, through the four setups in turn (all four at least once,
 * whatever the deadline); round `n` is seeded from `(seed, n)`. Longer runs get more batches
 * per round.
 */
async function fuzzHostile(o: FuzzOptions, deadline: number, report: FuzzReport): Promise<void> {
  const batches = o.seconds >= 60 ? 6 : 2;
  for (let n = 0; n < SETUPS.length || Date.now() < deadline; n++) {
    const setup = SETUPS[n % SETUPS.length];
    const seed = (o.seed * 0x9e3779b1 + n * 0x27d4eb2f) >>> 0;
    const res = await hostileRound(setup, seed, {
      batches,
      batchMs: 500,
      rate: o.corruptRate ?? 0.2,
    });
    report.hostileRounds++;
    report.hostileBatches += res.batches;
    report.hostileFrames += res.frames;
    report.hostileCorrupted += Object.values(res.corrupted).reduce((a, b) => a + b, 0);
    report.hostileAcked += res.acked;
    report.witnessAcks += res.witnessAcks;
    for (const f of res.findings) {
      report.crashes++;
      fail(report, `hostile ${setup.mode} ${setup.dialect} round ${n} (seed ${o.seed}): ${f}`);
    }
  }
}

/** The targets of `o` that run in the child process. */
function childTargets(o: FuzzOptions): ChildTarget[] {
  const only = o.only ?? TARGETS;
  return (Object.keys(CHILD_TARGETS) as ChildTarget[]).filter((t) => only.includes(t));
}

/**
 * Fuzzes, at the same time for `seconds`: the decoder, the reply decoders and the loaders (in
 * a child process), a live gateway (over TCP and WebSocket), and gateways behind a hostile Iggy;
 * `o.only` picks some of them. Reports the figures; never throws for a finding: findings are
 * in the report.
 */
export async function fuzz(o: FuzzOptions): Promise<FuzzReport> {
  const report: FuzzReport = {
    seconds: o.seconds,
    seed: o.seed,
    inputs: 0,
    decoderInputs: 0,
    socketInputs: 0,
    wsInputs: 0,
    replyInputs: 0,
    replyRefusals: 0,
    loaderInputs: 0,
    loaderRefusals: 0,
    hostileRounds: 0,
    hostileBatches: 0,
    hostileFrames: 0,
    hostileCorrupted: 0,
    hostileAcked: 0,
    protocolErrors: 0,
    decoderProtocolErrors: 0,
    gatewayProtocolErrors: 0,
    packets: 0,
    crashes: 0,
    hangs: 0,
    witnessAcks: 0,
    findings: {},
  };
  const onRejection = (e: PromiseRejectionEvent) => {
    e.preventDefault();
    report.crashes++;
    fail(report, `unhandled rejection: ${String(e.reason?.stack ?? e.reason)}`);
  };
  const onError = (e: ErrorEvent) => {
    e.preventDefault();
    report.crashes++;
    fail(report, `uncaught exception: ${String(e.error?.stack ?? e.message)}`);
  };
  globalThis.addEventListener("unhandledrejection", onRejection);
  globalThis.addEventListener("error", onError);
  // The gateway logs through its logger; what reaches console.error is an exception a server
  // of Deno's printed (a handler that threw), which a finding must show.
  const consoleError = console.error;
  console.error = (...args: unknown[]) => {
    report.crashes++;
    const text = args.map((a) => a instanceof Error ? a.stack ?? a.message : String(a)).join(" ");
    fail(report, `printed to stderr: ${text.slice(0, 600)}`, `stderr: ${text.split("\n")[0]}`);
  };
  const started = Date.now();
  const deadline = started + o.seconds * 1000;
  const only = o.only ?? TARGETS;
  const child = childTargets(o);
  const transports = { tcp: only.includes("sockets"), ws: only.includes("ws") };
  try {
    await Promise.all([
      child.length > 0 ? fuzzInChild(o.seed, deadline, child, report) : null,
      transports.tcp || transports.ws ? fuzzSockets(o, deadline, report, transports) : null,
      only.includes("hostile") ? fuzzHostile(o, deadline, report) : null,
    ]);
  } finally {
    globalThis.removeEventListener("unhandledrejection", onRejection);
    globalThis.removeEventListener("error", onError);
    console.error = consoleError;
  }
  report.seconds = Math.round((Date.now() - started) / 100) / 10;
  report.inputs = report.decoderInputs + report.socketInputs + report.wsInputs +
    report.replyInputs + report.loaderInputs + report.hostileFrames;
  report.protocolErrors = report.decoderProtocolErrors + report.gatewayProtocolErrors;
  return report;
}

function argValue(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

/** `--only a,b`: the targets named, each checked. */
function targetsArg(value: string | undefined): FuzzTarget[] | undefined {
  if (value === undefined) return undefined;
  const names = value.split(",").map((t) => t.trim());
  for (const t of names) {
    if (!(TARGETS as readonly string[]).includes(t)) {
      throw new Error(`Unknown fuzz target "${t}": one of ${TARGETS.join(", ")}`);
    }
  }
  return names as FuzzTarget[];
}

/** `--reproduce target:batch`: runs that one child batch in this process and prints it. */
async function reproduce(seed: number, what: string): Promise<void> {
  const [target, batch] = what.split(":");
  if (!(target in CHILD_TARGETS)) {
    throw new Error(`Cannot reproduce "${target}": one of decoder, replies, loaders`);
  }
  const res = await runChildBatch(seed, Number(batch), [target as ChildTarget]);
  console.log(JSON.stringify(res, null, 2));
}

if (import.meta.main && Deno.args.includes("--child")) {
  await runChild(
    Number(argValue(Deno.args, "--seed")),
    Number(argValue(Deno.args, "--from")),
    Number(argValue(Deno.args, "--until")),
    argValue(Deno.args, "--child")!.split(",") as ChildTarget[],
  );
} else if (import.meta.main && argValue(Deno.args, "--reproduce")) {
  await reproduce(Number(argValue(Deno.args, "--seed") ?? 0), argValue(Deno.args, "--reproduce")!);
} else if (import.meta.main) {
  const seconds = Number(argValue(Deno.args, "--seconds") ?? 600);
  const seed = Number(argValue(Deno.args, "--seed") ?? Math.floor(Math.random() * 2 ** 31));
  let only: FuzzTarget[] | undefined;
  try {
    only = targetsArg(argValue(Deno.args, "--only"));
  } catch (e) {
    console.error((e as Error).message);
    Deno.exit(2);
  }
  console.error(`Fuzzing ${only?.join(", ") ?? "everything"} for ${seconds} s with seed ${seed}`);
  const report = await fuzz({
    seconds,
    seed,
    only,
    port: argValue(Deno.args, "--port") ? Number(argValue(Deno.args, "--port")) : undefined,
    corruptRate: argValue(Deno.args, "--rate") ? Number(argValue(Deno.args, "--rate")) : undefined,
  });
  console.log(JSON.stringify(report, null, 2));
  if (report.crashes > 0 || report.hangs > 0) Deno.exitCode = 1;
}

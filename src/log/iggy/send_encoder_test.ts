import assert from "node:assert/strict";
import { type BatchMessage, encodeSendMessages } from "./batch.ts";
import { encodeUserHeaders } from "./encoding.ts";
import { loadHashes } from "../../base/xxhash.ts";
import { HEADER_SIZE } from "./header_layout.ts";
import {
  MAX_CACHED_STRINGS,
  MAX_SPARE_BUFFERS,
  MAX_SPARE_BYTES,
  runWireBytes,
  SendEncoder,
  wireSizeOf,
} from "./send_encoder.ts";
import type { EncodedMessages, OutgoingMessage } from "../port.ts";
import { encodeHeaders } from "../header_blob.ts";

await loadHashes();

const BASE = Uint8Array.from({ length: 16 }, (_, i) => 0xf0 - i * 7);
const fixedIds = (out: Uint8Array) => out.set(BASE);

/** The id SendEncoder gives message `i` of a batch with the fixed base (LE u128). */
function idOf(i: number): bigint {
  const b = BASE.slice();
  const v = new DataView(b.buffer);
  v.setUint32(0, (v.getUint32(0, true) + i) >>> 0, true);
  b[15] |= 0x80;
  let id = 0n;
  for (let k = 15; k >= 0; k--) id = (id << 8n) | BigInt(b[k]);
  return id;
}

const enc = new TextEncoder();
const msg = (payload: string, headers: [string, string][]): OutgoingMessage => ({
  payload: enc.encode(payload),
  headers: new Map(headers),
});

Deno.test("SendEncoder writes the same body as encodeSendMessages (the golden-vector path)", () => {
  const now = 1_764_000_000_123_456;
  const messages = [
    msg("21.5", [["mqtt.topic", "building/north/room/42/temp"], ["mqtt.qos", "1"], [
      "mqtt.client_id",
      "sensor-42",
    ], ["mqtt.packet_id", "7"]]),
    msg("x".repeat(300), [["mqtt.topic", "building/north/room/42/temp"], ["mqtt.qos", "0"]]),
    msg("é", [["mqtt.topic", "tëst/ünïcode/" + "ä".repeat(40)], ["mqtt.client_id", "Grüße"]]),
  ];
  const encoder = new SendEncoder(fixedIds);
  // Twice: the second time the strings come from the cache.
  for (let round = 0; round < 2; round++) {
    const frame = encoder.encode("building_north", "telemetry", 2, messages, now);
    const expected = encodeSendMessages(
      "building_north",
      "telemetry",
      2,
      messages.map((m, i): BatchMessage => ({
        id: idOf(i),
        payload: m.payload,
        userHeaders: encodeUserHeaders(m.headers),
        originTimestampMicros: BigInt(now),
      })),
    );
    assert.deepEqual(frame.subarray(HEADER_SIZE), expected);
  }
});

/** `messages` as a run still in the stored encoding (header blob, then payload, each). */
function runOf(messages: readonly OutgoingMessage[], gap = 3): EncodedMessages {
  const parts = messages.map((m) => [encodeHeaders(m.headers), m.payload]);
  const bytes = new Uint8Array(parts.reduce((n, [h, p]) => n + gap + h.length + p.length, 0));
  const spans = new Uint32Array(4 * messages.length);
  let at = 0;
  parts.forEach(([h, p], i) => {
    at += gap; // a record's fixed part sits between messages in a read
    spans[4 * i] = 0; // one piece
    spans[4 * i + 1] = at;
    bytes.set(h, at);
    spans[4 * i + 2] = at += h.length;
    bytes.set(p, at);
    spans[4 * i + 3] = at += p.length;
  });
  const payloadBytes = messages.reduce((n, m) => n + m.payload.length, 0);
  return {
    pieces: [bytes],
    spans,
    count: messages.length,
    firstOffset: 0,
    firstTimestampMicros: 0,
    payloadBytes,
  };
}

Deno.test("SendEncoder: stored runs encode to the same body as their messages decoded, alone and among messages", () => {
  const now = 1_764_000_000_123_456;
  const messages = [
    msg("21.5", [["mqtt.topic", "a/b"], ["mqtt.qos", "1"], ["mqtt.client_id", "s-42"]]),
    msg("x".repeat(300), [["mqtt.topic", "a/b"], ["mqtt5.user.0.unit", "°C"]]),
    msg("é", [["mqtt.topic", "tëst/" + "ä".repeat(40)], ["mqtt.gateway", "edge"]]),
    msg("z", []),
  ];
  const encoder = new SendEncoder(fixedIds);
  const decoded = encoder.encode("s", "t", 1, messages, now).slice();
  const run = runOf(messages);
  assert.equal(runWireBytes(run), wireSizeOf(run));
  const exact = runWireBytes(run);
  assert.deepEqual(encoder.encode("s", "t", 1, [run], now, exact, messages.length), decoded);
  const mixed = [messages[0], runOf(messages.slice(1, 3)), messages[3]];
  assert.deepEqual(encoder.encode("s", "t", 1, mixed, now, undefined, 4), decoded);
});

Deno.test("SendEncoder refuses a run with an empty payload or a header Iggy cannot take", () => {
  const encoder = new SendEncoder(fixedIds);
  const empty = runOf([msg("", [["mqtt.topic", "a"]])]);
  assert.throws(() => encoder.encode("s", "t", 0, [empty], 1, undefined, 1), RangeError);
  const long = runOf([msg("p", [["mqtt.topic", "x".repeat(256)]])]);
  assert.throws(() => runWireBytes(long), /1..255 bytes/);
});

Deno.test("SendEncoder: messages sharing one header map encode as with a map each, and their bound too", () => {
  // The envelope hands a client's QoS 0 run one map; the encoder copies the headers it wrote
  // for the message before. Between runs of the shared map, other maps (a QoS 1 message).
  const now = 1_764_000_000_123_456;
  const shared = new Map([["mqtt.topic", "plant/line-7/press/pressure"], ["mqtt.qos", "0"], [
    "mqtt.client_id",
    "press-7",
  ]]);
  const other = new Map([["mqtt.topic", "plant/line-7/press/pressure"], ["mqtt.qos", "1"], [
    "mqtt.client_id",
    "press-7",
  ], ["mqtt.packet_id", "300"]]);
  const maps = [shared, shared, other, shared, shared, shared];
  const sharing = maps.map((headers, i) => ({
    payload: enc.encode(`v${i}`.repeat(i + 1)),
    headers,
  }));
  const copied = sharing.map((m) => ({ payload: m.payload, headers: new Map(m.headers) }));
  const frame = new SendEncoder(fixedIds).encode("plant", "telemetry", 0, sharing, now);
  assert.deepEqual(frame, new SendEncoder(fixedIds).encode("plant", "telemetry", 0, copied, now));
  assert.deepEqual(sharing.map(wireSizeOf), copied.map(wireSizeOf));
});

Deno.test("SendEncoder: ids differ within a batch and across batches; never zero", () => {
  const encoder = new SendEncoder();
  const ids = new Set<string>();
  for (let b = 0; b < 3; b++) {
    const frame = encoder.encode("s", "t", 0, [msg("a", []), msg("b", [])], 1);
    let at = HEADER_SIZE + 4 + 3 + 3 + 6 + 4 + 256;
    for (let i = 0; i < 2; i++) {
      const id = frame.subarray(at + 8, at + 24);
      assert.ok(id.some((x) => x !== 0));
      ids.add(id.join(","));
      at += 48 + 1;
    }
  }
  assert.equal(ids.size, 6);
});

Deno.test("SendEncoder refuses an empty payload, an over-long header value and bad names", () => {
  const encoder = new SendEncoder(fixedIds);
  assert.throws(() => encoder.encode("s", "t", 0, [msg("", [])], 1), /payload is empty/);
  assert.throws(
    () => encoder.encode("s", "t", 0, [msg("a", [["k", "v".repeat(256)]])], 1),
    /1\.\.255 bytes, got 256/,
  );
  assert.throws(() => encoder.encode("", "t", 0, [msg("a", [])], 1), /Identifier/);
  assert.throws(() => encoder.encode("s", "t", 0, [msg("a", [["k", ""]])], 1), /got 0/);
});

Deno.test("SendEncoder's string cache is bounded", () => {
  const encoder = new SendEncoder(fixedIds);
  for (let i = 0; i < MAX_CACHED_STRINGS + 10; i++) {
    encoder.encode("s", `topic-${i}`, 0, [msg("a", [["mqtt.topic", `a/long/topic/name/${i}`]])], 1);
  }
  assert.ok(encoder.cachedStrings <= MAX_CACHED_STRINGS, `${encoder.cachedStrings} cached`);
  assert.ok(encoder.encode("s", "t", 0, [msg("a", [])], 1).length > 0);
});

Deno.test("SendEncoder's header-key cache is bounded, and a key from a cleared cache encodes the same", () => {
  const encoder = new SendEncoder(fixedIds);
  const first = encoder.encode("s", "t", 0, [msg("a", [["key-0", "v"]])], 1);
  for (let i = 0; i < MAX_CACHED_STRINGS + 10; i++) {
    encoder.encode("s", "t", 0, [msg("a", [[`key-${i}`, "v"]])], 1);
  }
  assert.ok(encoder.cachedKeys <= MAX_CACHED_STRINGS, `${encoder.cachedKeys} keys cached`);
  assert.deepEqual(encoder.encode("s", "t", 0, [msg("a", [["key-0", "v"]])], 1), first);
});

Deno.test("SendEncoder: a batch encoded into a spare buffer full of old bytes is the same as into a fresh one", () => {
  const now = 1_764_000_000_123_456;
  const big = Array.from(
    { length: 40 },
    (_, i) =>
      msg("p".repeat(50 + i), [["mqtt.topic", `site/${i}/` + "x".repeat(60)], ["mqtt.qos", "1"], [
        "mqtt.client_id",
        `client-${i}-` + "c".repeat(30),
      ], ["mqtt.packet_id", String(60_000 + i)]]),
  );
  const small = [
    msg("1", [["mqtt.topic", "a/b"], ["mqtt.qos", "0"]]),
    msg("22", [["mqtt.topic", "a/b"], ["k", "v"]]),
  ];
  const reused = new SendEncoder(fixedIds);
  const first = reused.encode("s", "t", 1, big, now);
  new Uint8Array(first.buffer).fill(0xff); // what an older batch could leave anywhere
  reused.release(first);
  assert.equal(reused.spareBuffers, 1);
  const second = reused.encode("s", "t", 3, small, now + 5);
  assert.equal(second.buffer, first.buffer, "the spare was used");
  assert.deepEqual(second, new SendEncoder(fixedIds).encode("s", "t", 3, small, now + 5));
});

Deno.test("SendEncoder keeps at most MAX_SPARE_BUFFERS, each taken back once, and none too large", () => {
  const m = [msg("x", [["mqtt.topic", "a"]])];
  const encoder = new SendEncoder(fixedIds);
  const frames = Array.from(
    { length: MAX_SPARE_BUFFERS + 2 },
    () => encoder.encode("s", "t", 0, m, 1),
  );
  assert.equal(new Set(frames.map((f) => f.buffer)).size, frames.length, "no buffer lent twice");
  for (const f of frames) encoder.release(f);
  assert.equal(encoder.spareBuffers, MAX_SPARE_BUFFERS);
  encoder.release(frames[0]); // again: ignored
  encoder.release(new Uint8Array(100)); // not the encoder's: ignored
  assert.equal(encoder.spareBuffers, MAX_SPARE_BUFFERS);
  // Two frames taken while both are out never share a buffer.
  const a = encoder.encode("s", "t", 0, m, 1);
  const b = encoder.encode("s", "t", 0, m, 1);
  assert.notEqual(a.buffer, b.buffer);
  assert.equal(encoder.spareBuffers, MAX_SPARE_BUFFERS - 2);
  // A batch bigger than MAX_SPARE_BYTES is not kept once confirmed.
  const huge = encoder.encode("s", "t", 0, [{
    payload: new Uint8Array(MAX_SPARE_BYTES),
    headers: new Map(),
  }], 1);
  encoder.release(huge);
  assert.equal(encoder.spareBuffers, MAX_SPARE_BUFFERS - 2);
});

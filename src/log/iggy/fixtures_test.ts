/**
 * Real reply frames captured from an Iggy server (upstream cc269ef7, 0.9.0-edge.5, protocol
 * 0.11.0) by `tests/fixtures/iggy011/capture_frames.ts`, decoded end to end: header, status, result
 * section, payload.
 */
import assert from "node:assert/strict";
import { decodePollReply, decodeSendReply } from "./batch.ts";
import { fromHex } from "./bytes.ts";
import { IggyError, IggyEvictionError } from "./codes.ts";
import { decodeOffsetReply } from "./v11/request_bodies.ts";
import { decodeUserHeaders } from "./encoding.ts";
import { HEADER_SIZE, readReplyHeader } from "./header_layout.ts";
import { decodeRegisterReply } from "./login.ts";
import { decodeStreams, decodeTopic, decodeUser } from "./v11/records.ts";
import { decodeReply } from "./reply.ts";

async function frame(name: string): Promise<[Uint8Array, Uint8Array]> {
  const url = new URL(`../../../tests/fixtures/iggy011/${name}.hex`, import.meta.url);
  const f = fromHex(await Deno.readTextFile(url));
  return [f.subarray(0, HEADER_SIZE), f.subarray(HEADER_SIZE)];
}

async function payload(name: string, code: number): Promise<Uint8Array> {
  const [h, b] = await frame(name);
  return decodeReply(h, b, code);
}

Deno.test("fixture: Register reply binds a session and names server protocol 0.11.0", async () => {
  const r = decodeRegisterReply(await payload("register_reply", 40));
  assert.equal(r.userId, 0);
  assert.ok(r.session > 0n);
  assert.equal(r.serverProtocolVersion, 0x2c00);
  assert.match(r.serverVersion, /^0\.9\.0/);
});

Deno.test("fixture: a wrong password is an InvalidCredentials eviction", async () => {
  const [h, b] = await frame("register_bad_password_eviction");
  assert.throws(
    () => decodeReply(h, b, 40),
    (e) => e instanceof IggyEvictionError && e.reason === 9,
  );
});

Deno.test("fixture: CreateTopic reply echoes operation 64 and is result-framed", async () => {
  const [h] = await frame("create_topic_reply");
  assert.equal(readReplyHeader(h).operation, 64);
  const t = decodeTopic(await payload("create_topic_reply", 302));
  assert.equal(t?.name, "t");
  assert.equal(t?.partitionsCount, 2);
  assert.equal(t?.partitions.length, 2);
  // Created without one: the server says u64::MAX, never: no expiry of the topic's own.
  assert.equal(t?.messageExpiryMicros, undefined);
});

Deno.test("fixture: creating an existing topic fails with 2013 in the result section", async () => {
  await assert.rejects(
    payload("create_topic_exists_reply", 302),
    (e) => e instanceof IggyError && e.code === 2013,
  );
});

Deno.test("fixture: CreateStream reply carries the stream record", async () => {
  const [s] = decodeStreams(await payload("create_stream_reply", 202));
  assert.equal(s.name, "fixture");
});

Deno.test("fixture: SendMessages reply gives the base offset", async () => {
  assert.equal(decodeSendReply(await payload("send_messages_reply", 101)), 0);
});

Deno.test("fixture: GET_TOPIC after a send shows the partition's last offset", async () => {
  const t = decodeTopic(await payload("get_topic_reply", 300));
  assert.deepEqual(t?.partitions.map((p) => [p.id, p.currentOffset, p.messagesCount]), [
    [0, 0, 0],
    [1, 1, 2],
  ]);
  assert.equal(decodeTopic(await payload("get_topic_missing_reply", 300)), null);
});

Deno.test("fixture: POLL_MESSAGES reply decodes offsets, payloads and headers", async () => {
  const r = decodePollReply(await payload("poll_messages_reply", 100));
  assert.equal(r.partitionId, 1);
  assert.deepEqual(r.messages.map((m) => m.offset), [0, 1]);
  assert.deepEqual(r.messages.map((m) => m.id), [7n, 8n]);
  assert.equal(new TextDecoder().decode(r.messages[1].payload), "second-payload");
  assert.deepEqual(decodeUserHeaders(r.messages[0].userHeaders), new Map([["mqtt.topic", "a/b"]]));
  assert.deepEqual(r.messages.map((m) => m.originTimestampMicros), [
    1_700_000_000_000_000,
    1_700_000_000_000_050,
  ]);
  assert.ok(r.messages[0].timestampMicros > 1.5e15, "server append time in µs");
});

Deno.test("fixture: polling a missing stream is status 1009", async () => {
  await assert.rejects(
    payload("poll_missing_stream_reply", 100),
    (e) => e instanceof IggyError && e.code === 1009,
  );
});

Deno.test("fixture: consumer offsets: none is an empty body, stored reads back", async () => {
  assert.equal(decodeOffsetReply(await payload("get_offset_none_reply", 120)), null);
  assert.equal((await payload("store_offset_reply", 121)).length, 0);
  assert.equal(decodeOffsetReply(await payload("get_offset_reply", 120)), 1);
});

Deno.test("fixture: GET_USER of root carries every global permission", async () => {
  const u = decodeUser(await payload("get_user_root_reply", 31));
  assert.equal(u?.username, "iggy");
  assert.equal(u?.status, 1);
  assert.ok(u?.permissions?.global.every((f) => f));
});

Deno.test("fixture: DeleteStream reply is an empty result section", async () => {
  assert.equal((await payload("delete_stream_reply", 203)).length, 0);
});

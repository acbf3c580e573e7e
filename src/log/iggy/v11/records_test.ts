import assert from "node:assert/strict";
import { ByteWriter } from "../bytes.ts";
import { writeName } from "../encoding.ts";
import {
  decodeStreamDetails,
  decodeStreams,
  decodeTopic,
  decodeUser,
  nextOffsetOf,
} from "./records.ts";
import {
  streamBytes,
  topicBody,
  topicHeaderBytes,
} from "../../../../tests/helpers/fake_iggy/records.ts";

Deno.test("decodeTopic() reads the header and 40-byte partitions; empty body is null", () => {
  const t = decodeTopic(topicBody("temps", [[0, 0], [4, 5]]));
  assert.equal(t?.name, "temps");
  assert.equal(t?.partitionsCount, 2);
  assert.deepEqual(t?.partitions, [
    { id: 0, currentOffset: 0, messagesCount: 0 },
    { id: 1, currentOffset: 4, messagesCount: 5 },
  ]);
  assert.equal(decodeTopic(new Uint8Array(0)), null);
});

Deno.test("nextOffsetOf() is 0 for an empty partition and current_offset + 1 otherwise", () => {
  assert.equal(nextOffsetOf({ id: 0, currentOffset: 0, messagesCount: 0 }), 0);
  assert.equal(nextOffsetOf({ id: 0, currentOffset: 0, messagesCount: 1 }), 1);
  assert.equal(nextOffsetOf({ id: 0, currentOffset: 9, messagesCount: 10 }), 10);
});

Deno.test("decodeStreams() and decodeStreamDetails() read streams and topic headers", () => {
  const w = new ByteWriter();
  streamBytes(w, 1, "a");
  streamBytes(w, 4, "b");
  assert.deepEqual(decodeStreams(w.finish()).map((s) => [s.id, s.name]), [[1, "a"], [4, "b"]]);
  const d = new ByteWriter();
  streamBytes(d, 4, "b", 2);
  topicHeaderBytes(d, 0, "x", 1);
  topicHeaderBytes(d, 3, "y", 2);
  const details = decodeStreamDetails(d.finish());
  assert.equal(details?.stream.name, "b");
  assert.deepEqual(details?.topics.map((t) => [t.id, t.name]), [[0, "x"], [3, "y"]]);
});

function userHead(w: ByteWriter, id: number, status: number, name: string): ByteWriter {
  w.u32(id).u64(1).u8(status);
  return writeName(w, name).u32(0);
}

Deno.test("decodeUser() reads the no-permissions form (four zero bytes)", () => {
  const u = decodeUser(userHead(new ByteWriter(), 3, 1, "dev").u32(0).finish());
  assert.deepEqual(u, { id: 3, status: 1, username: "dev", permissions: null });
});

Deno.test("decodeUser() reads global, stream and topic permissions", () => {
  const p = new ByteWriter();
  for (let i = 0; i < 10; i++) p.u8(i === 9 ? 1 : 0); // send_messages only
  p.u8(1); // has streams
  p.u32(7).u8(0).u8(1).u8(0).u8(0).u8(0).u8(0).u8(1); // stream 7 read_stream, has topics
  p.u32(2).u8(0).u8(0).u8(1).u8(0).u8(1); // topic 2 poll, has next
  p.u32(3).u8(1).u8(0).u8(0).u8(0).u8(0); // topic 3 manage, last
  p.u8(0); // last stream
  const perms = p.finish().slice();
  const u = decodeUser(
    userHead(new ByteWriter(), 3, 1, "dev").u8(1).u32(perms.length).bytes(perms).finish(),
  );
  assert.equal(u?.permissions?.global[9], true);
  assert.equal(u?.permissions?.global[0], false);
  assert.equal(u?.permissions?.streams.length, 1);
  const s = u!.permissions!.streams[0];
  assert.equal(s.streamId, 7);
  assert.deepEqual(s.flags, [false, true, false, false, false, false]);
  assert.deepEqual(s.topics.map((t) => [t.topicId, t.flags]), [
    [2, [false, false, true, false]],
    [3, [true, false, false, false]],
  ]);
});

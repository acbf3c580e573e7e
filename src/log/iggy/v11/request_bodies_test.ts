import assert from "node:assert/strict";
import {
  createTopicBody,
  deleteOffsetBody,
  deleteOffsetBodyWithAck,
  getOffsetBody,
} from "./request_bodies.ts";
import { decodeUserHeaders } from "../encoding.ts";

/** The options TLV after `[stream Id][partitions][name]` of a CREATE_TOPIC body. */
function optionsOf(body: Uint8Array, stream: string, topic: string): Uint8Array {
  return body.subarray(2 + stream.length + 4 + 1 + topic.length);
}

Deno.test("createTopicBody(): a durable topic enforces fsync and persists every message", () => {
  const body = createTopicBody("s", "t", { partitions: 3, durable: true });
  const tlv = optionsOf(body, "s", "t");
  assert.deepEqual(
    [...decodeUserHeaders(tlv)],
    [["enforce_fsync", "true"], ["messages_required_to_save", "1"]],
  );
  // Kinds as the server's parser wants them: Bool (3) of 1 byte, Uint32 (11) of 4 bytes.
  assert.equal(tlv[5 + 13], 3);
  assert.equal(tlv[5 + 13 + 5], 1);
  const key2 = 5 + 13 + 5 + 1;
  assert.equal(tlv[key2 + 5 + 25], 11);
  assert.deepEqual([...tlv.subarray(key2 + 5 + 25 + 1)], [4, 0, 0, 0, 1, 0, 0, 0]);
});

Deno.test("createTopicBody(): server_default durability sends no flush options", () => {
  const body = createTopicBody("s", "t", { partitions: 3 });
  assert.equal(optionsOf(body, "s", "t").length, 0);
});

Deno.test("deleteOffsetBodyWithAck(): protocol 0.11's DELETE_CONSUMER_OFFSET is GET's fields and the ack byte (Iggy 0.9 refuses it without, error 20); 0.12's has none", () => {
  const target = { stream: "s", topic: "t", partition: 2 };
  const get = getOffsetBody("mqtt-session-a", target);
  assert.deepEqual([...deleteOffsetBodyWithAck("mqtt-session-a", target)], [...get, 1]);
  assert.deepEqual([...deleteOffsetBody("mqtt-session-a", target)], [...get]);
});

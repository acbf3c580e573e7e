/**
 * Encoders against the oracle: mqtt-packet's parser reads what we write, and where mqtt-packet
 * generates the same packet its bytes equal ours.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import mqttPacket from "mqtt-packet";
import {
  ConnackCode,
  encodeConnack,
  encodePingresp,
  encodePuback,
  encodePublish,
  encodeSuback,
  encodeUnsuback,
  SUBACK_FAILURE,
  utf8,
  writePuback,
} from "./encoder.ts";

// deno-lint-ignore no-explicit-any
type Oracle = any;

/** Parses bytes with mqtt-packet; exactly one packet, no error, nothing left over. */
function parseOne(bytes: Uint8Array): Oracle {
  const parser = mqttPacket.parser({ protocolVersion: 4 });
  const out: Oracle[] = [];
  const errors: Error[] = [];
  parser.on("packet", (p: Oracle) => out.push(p));
  parser.on("error", (e: Error) => errors.push(e));
  const left = parser.parse(Buffer.from(bytes));
  assert.deepEqual(errors, []);
  assert.equal(left, 0, "bytes left over");
  assert.equal(out.length, 1);
  return out[0];
}

function generate(p: Record<string, unknown>): Uint8Array {
  return new Uint8Array(mqttPacket.generate(p as unknown as mqttPacket.Packet));
}

Deno.test("encodeConnack() writes every 3.1.1 return code as mqtt-packet does", () => {
  for (const code of Object.values(ConnackCode)) {
    for (const sessionPresent of [false, true]) {
      const ours = encodeConnack(sessionPresent, code);
      const p = parseOne(ours);
      assert.equal(p.cmd, "connack");
      assert.equal(p.returnCode, code);
      assert.equal(p.sessionPresent, sessionPresent);
      assert.deepEqual(ours, generate({ cmd: "connack", returnCode: code, sessionPresent }));
    }
  }
});

Deno.test("encodeSuback() writes granted codes and 0x80 failures as mqtt-packet does", () => {
  const cases: [number, number[]][] = [
    [1, [0]],
    [65535, [1, SUBACK_FAILURE, 0]],
    [300, new Array(200).fill(0).map((_, i) => [0, 1, SUBACK_FAILURE][i % 3])], // 2-byte length
  ];
  for (const [id, granted] of cases) {
    const ours = encodeSuback(id, granted);
    const p = parseOne(ours);
    assert.equal(p.cmd, "suback");
    assert.equal(p.messageId, id);
    assert.deepEqual(p.granted, granted);
    assert.deepEqual(ours, generate({ cmd: "suback", messageId: id, granted }));
  }
});

Deno.test("encodeUnsuback() writes the packet id as mqtt-packet does", () => {
  for (const id of [1, 256, 65535]) {
    const ours = encodeUnsuback(id);
    assert.equal(parseOne(ours).messageId, id);
    assert.deepEqual(ours, generate({ cmd: "unsuback", messageId: id }));
  }
});

Deno.test("encodePingresp() is a PINGRESP", () => {
  assert.equal(parseOne(encodePingresp()).cmd, "pingresp");
  assert.deepEqual(encodePingresp(), generate({ cmd: "pingresp" }));
});

Deno.test("encodePuback() and writePuback() write a PUBACK at any offset", () => {
  for (const id of [1, 255, 256, 65535]) {
    const ours = encodePuback(id);
    assert.equal(parseOne(ours).messageId, id);
    assert.deepEqual(ours, generate({ cmd: "puback", messageId: id }));
    const out = new Uint8Array(10).fill(0xaa);
    assert.equal(writePuback(out, 3, id), 7);
    assert.deepEqual(out.subarray(3, 7), ours);
    assert.deepEqual([...out.subarray(0, 3), ...out.subarray(7)], new Array(6).fill(0xaa));
  }
});

Deno.test("encodePublish() round-trips through mqtt-packet at every remaining-length width", () => {
  const topic = "sensors/é/data";
  const topicBytes = utf8(topic);
  // Remaining lengths on both sides of each varint width boundary.
  for (const remaining of [127, 128, 16_383, 16_384, 2_097_151, 2_097_152]) {
    for (const qos of [0, 1] as const) {
      const n = remaining - 2 - topicBytes.length - (qos ? 2 : 0);
      const payload = new Uint8Array(n).map((_, i) => (i * 31) & 0xff);
      const ours = encodePublish(topicBytes, payload, qos, qos ? 513 : 0, false);
      const p = parseOne(ours);
      assert.equal(p.length, remaining);
      assert.equal(p.topic, topic);
      assert.equal(p.qos, qos);
      assert.equal(p.messageId, qos ? 513 : undefined);
      assert.deepEqual(new Uint8Array(p.payload), payload);
      const oracle = generate({
        cmd: "publish",
        topic,
        payload: Buffer.from(payload),
        qos,
        messageId: qos ? 513 : undefined,
      });
      assert.deepEqual(ours, oracle, `remaining ${remaining} qos ${qos}`);
    }
  }
});

Deno.test("encodePublish() sets DUP and RETAIN and writes an empty payload", () => {
  const ours = encodePublish(utf8("a/b"), new Uint8Array(0), 1, 65535, true, true);
  const p = parseOne(ours);
  assert.equal(p.dup, true);
  assert.equal(p.retain, true);
  assert.equal(p.messageId, 65535);
  assert.equal(p.payload.length, 0);
  assert.deepEqual(
    ours,
    generate({
      cmd: "publish",
      topic: "a/b",
      payload: Buffer.alloc(0),
      qos: 1,
      messageId: 65535,
      dup: true,
      retain: true,
    }),
  );
});

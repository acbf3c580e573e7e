import assert from "node:assert/strict";
import { envelope, EnvelopeMaker, H_PACKET_ID } from "./envelope.ts";

const bytes = (s: string) => new TextEncoder().encode(s);

Deno.test("EnvelopeMaker shares one header map across a client's QoS 0 messages to a topic", () => {
  const maker = new EnvelopeMaker();
  const a = maker.make({
    topic: "plant/press/1",
    payload: bytes("1"),
    qos: 0,
    packetId: 0,
    retain: false,
  }, "press-1");
  const b = maker.make({
    topic: "plant/press/1",
    payload: bytes("2"),
    qos: 0,
    packetId: 0,
    retain: false,
  }, "press-1");
  assert.equal(b.headers, a.headers);
  assert.deepEqual(b.payload, bytes("2"));
  assert.deepEqual(
    a.headers,
    envelope("plant/press/1", bytes("1"), 0, "press-1", 0, false).headers,
  );
});

Deno.test("EnvelopeMaker makes a new map whenever the headers would differ", () => {
  const maker = new EnvelopeMaker();
  // Each one differs in one field from the message made just before it.
  const cases = [
    [
      "another topic",
      () =>
        maker.make({ topic: "t/2", payload: bytes("x"), qos: 0, packetId: 0, retain: false }, "c1"),
    ],
    [
      "another client",
      () =>
        maker.make({ topic: "t/1", payload: bytes("x"), qos: 0, packetId: 0, retain: false }, "c2"),
    ],
    [
      "retained",
      () =>
        maker.make({ topic: "t/1", payload: bytes("x"), qos: 0, packetId: 0, retain: true }, "c1"),
    ],
    [
      "QoS 1",
      () =>
        maker.make({ topic: "t/1", payload: bytes("x"), qos: 1, packetId: 9, retain: false }, "c1"),
    ],
    [
      "a will",
      () =>
        maker.make(
          { topic: "t/1", payload: bytes("x"), qos: 0, packetId: 0, retain: false },
          "c1",
          true,
        ),
    ],
    [
      "MQTT 5 properties",
      () =>
        maker.make(
          { topic: "t/1", payload: bytes("x"), qos: 0, packetId: 0, retain: false, properties: {} },
          "c1",
          false,
        ),
    ],
    [
      "an empty payload",
      () =>
        maker.make(
          { topic: "t/1", payload: new Uint8Array(0), qos: 0, packetId: 0, retain: false },
          "c1",
        ),
    ],
  ] as const;
  for (const [what, make] of cases) {
    const before = maker.make({
      topic: "t/1",
      payload: bytes("x"),
      qos: 0,
      packetId: 0,
      retain: false,
    }, "c1");
    assert.equal(
      maker.make({ topic: "t/1", payload: bytes("y"), qos: 0, packetId: 0, retain: false }, "c1")
        .headers,
      before.headers,
    );
    assert.notEqual(make().headers, before.headers, what);
  }
  const qos1 = maker.make(
    { topic: "t/1", payload: bytes("x"), qos: 1, packetId: 9, retain: false },
    "c1",
  );
  assert.equal(qos1.headers.get(H_PACKET_ID), "9");
  assert.notEqual(
    maker.make({ topic: "t/1", payload: bytes("x"), qos: 1, packetId: 10, retain: false }, "c1")
      .headers,
    qos1.headers,
  );
});

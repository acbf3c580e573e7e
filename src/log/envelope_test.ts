import assert from "node:assert/strict";
import { envelope, EnvelopeMaker, H_PACKET_ID } from "./envelope.ts";

const bytes = (s: string) => new TextEncoder().encode(s);

Deno.test("EnvelopeMaker shares one header map across a client's QoS 0 messages to a topic", () => {
  const maker = new EnvelopeMaker();
  const a = maker.make("plant/press/1", bytes("1"), 0, "press-1", 0, false);
  const b = maker.make("plant/press/1", bytes("2"), 0, "press-1", 0, false);
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
    ["another topic", () => maker.make("t/2", bytes("x"), 0, "c1", 0, false)],
    ["another client", () => maker.make("t/1", bytes("x"), 0, "c2", 0, false)],
    ["retained", () => maker.make("t/1", bytes("x"), 0, "c1", 0, true)],
    ["QoS 1", () => maker.make("t/1", bytes("x"), 1, "c1", 9, false)],
    ["a will", () => maker.make("t/1", bytes("x"), 0, "c1", 0, false, true)],
    ["MQTT 5 properties", () => maker.make("t/1", bytes("x"), 0, "c1", 0, false, false, {})],
    ["an empty payload", () => maker.make("t/1", new Uint8Array(0), 0, "c1", 0, false)],
  ] as const;
  for (const [what, make] of cases) {
    const before = maker.make("t/1", bytes("x"), 0, "c1", 0, false);
    assert.equal(maker.make("t/1", bytes("y"), 0, "c1", 0, false).headers, before.headers);
    assert.notEqual(make().headers, before.headers, what);
  }
  const qos1 = maker.make("t/1", bytes("x"), 1, "c1", 9, false);
  assert.equal(qos1.headers.get(H_PACKET_ID), "9");
  assert.notEqual(maker.make("t/1", bytes("x"), 1, "c1", 10, false).headers, qos1.headers);
});

import assert from "node:assert/strict";
import { envelope, EnvelopeMaker, H_PACKET_ID } from "./envelope.ts";
import { readStoredProperties } from "./envelope_v5.ts";
import { findTraceProperties } from "./trace_headers.ts";

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

const TRACEPARENT_VALUE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

Deno.test("a traceparent user property is stored once, under the W3C names, and comes back where it was sent", () => {
  const users = [
    ["site", "north"],
    ["traceparent", TRACEPARENT_VALUE],
    ["tag", "a"],
    ["tracestate", "vendor=x"],
    ["tag", "b"],
  ] as const;
  const props = { userProperties: users };
  const at = findTraceProperties(users)!;
  assert.deepEqual(at, { parentAt: 1, stateAt: 3 });
  const trace = { traceparent: TRACEPARENT_VALUE, tracestate: "vendor=x", ...at };
  const m = envelope("t/1", bytes("x"), 1, "c1", 7, false, false, props, trace);
  assert.equal(m.headers.get("traceparent"), TRACEPARENT_VALUE);
  assert.equal(m.headers.get("tracestate"), "vendor=x");
  const stored = [...m.headers.keys()];
  assert.deepEqual(stored.filter((k) => k.includes("trace")), ["traceparent", "tracestate"]);
  assert.deepEqual(readStoredProperties(m.headers)?.userProperties, users);
});

Deno.test("trace user properties come back in order when they were sent last, and a trace the gateway began comes after the rest", () => {
  const users = [["site", "north"], ["traceparent", TRACEPARENT_VALUE]] as const;
  const at = findTraceProperties(users)!;
  const trace = { traceparent: TRACEPARENT_VALUE, tracestate: null, ...at };
  const m = envelope("t/1", bytes("x"), 0, "c1", 0, false, false, { userProperties: users }, trace);
  assert.deepEqual(readStoredProperties(m.headers)?.userProperties, users);
  // A 3.1.1 PUBLISH in a trace the gateway began: MQTT 5 subscribers get the traceparent.
  const began = { traceparent: TRACEPARENT_VALUE, tracestate: null, parentAt: -1, stateAt: -1 };
  const plain = envelope("t/1", bytes("x"), 0, "c1", 0, false, false, undefined, began);
  assert.deepEqual(readStoredProperties(plain.headers), {
    userProperties: [["traceparent", TRACEPARENT_VALUE]],
  });
  const v5 = envelope("t/1", bytes("x"), 0, "c1", 0, false, false, {
    userProperties: [["a", "1"]],
  }, began);
  assert.deepEqual(readStoredProperties(v5.headers)?.userProperties, [
    ["a", "1"],
    ["traceparent", TRACEPARENT_VALUE],
  ]);
});

Deno.test("findTraceProperties takes the first traceparent and a tracestate only after it", () => {
  assert.equal(findTraceProperties([["a", "1"]]), null);
  assert.deepEqual(
    findTraceProperties([["tracestate", "s"], ["traceparent", "p"], ["traceparent", "q"]]),
    { parentAt: 1, stateAt: -1 },
  );
  // A tracestate sent before the traceparent stays a plain user property, in its place.
  const users = [["tracestate", "s"], ["traceparent", TRACEPARENT_VALUE]] as const;
  const at = findTraceProperties(users)!;
  const trace = { traceparent: TRACEPARENT_VALUE, tracestate: null, ...at };
  const m = envelope("t/1", bytes("x"), 0, "c1", 0, false, false, { userProperties: users }, trace);
  assert.equal(m.headers.get("mqtt5.user.0.tracestate"), "s");
  assert.equal(m.headers.has("tracestate"), false);
  assert.deepEqual(readStoredProperties(m.headers)?.userProperties, users);
});

Deno.test("EnvelopeMaker does not share the header map of a traced QoS 0 message", () => {
  const maker = new EnvelopeMaker();
  const p = { topic: "t/1", payload: bytes("x"), qos: 0 as const, packetId: 0, retain: false };
  const plain = maker.make(p, "c1");
  const trace = { traceparent: TRACEPARENT_VALUE, tracestate: null, parentAt: -1, stateAt: -1 };
  const traced = maker.make(p, "c1", false, trace);
  assert.notEqual(traced.headers, plain.headers);
  assert.equal(traced.headers.get("traceparent"), TRACEPARENT_VALUE);
  assert.equal(maker.make(p, "c1").headers.has("traceparent"), false);
});

import assert from "node:assert/strict";
import { checkResolution, isValidIggyName } from "./names.ts";

Deno.test("isValidIggyName() accepts 1 to 255 UTF-8 bytes of any characters", () => {
  assert.equal(isValidIggyName("a"), true);
  assert.equal(isValidIggyName("x".repeat(255)), true);
  assert.equal(isValidIggyName("Sensors With Spaces/and/slashes"), true);
  assert.equal(isValidIggyName("é".repeat(127)), true); // 254 bytes
  assert.equal(isValidIggyName("🌡".repeat(63)), true); // 252 bytes
});

Deno.test("isValidIggyName() refuses empty names and names over 255 UTF-8 bytes", () => {
  assert.equal(isValidIggyName(""), false);
  assert.equal(isValidIggyName("x".repeat(256)), false);
  assert.equal(isValidIggyName("é".repeat(128)), false); // 128 chars, 256 bytes
  assert.equal(isValidIggyName("🌡".repeat(64)), false); // 64 code points, 256 bytes
});

Deno.test("isValidIggyName() refuses a lone surrogate, which has no UTF-8 form", () => {
  assert.equal(isValidIggyName("a\ud800b"), false);
  assert.equal(isValidIggyName("\udc00"), false);
});

Deno.test("checkResolution() returns null when stream, topic and key are valid", () => {
  assert.equal(checkResolution({ rule: 1, stream: "s", topic: "t", partitionKey: "k" }), null);
  assert.equal(checkResolution({ rule: null, stream: "s", topic: "t", partitionKey: null }), null);
});

Deno.test("checkResolution() explains an empty resolved stream", () => {
  assert.equal(
    checkResolution({ rule: 1, stream: "", topic: "t", partitionKey: null }),
    'resolved stream "" is not a valid Iggy name (1-255 bytes)',
  );
});

Deno.test("checkResolution() explains a resolved topic over 255 bytes, elided", () => {
  const reason = checkResolution({
    rule: 1,
    stream: "s",
    topic: "t".repeat(300),
    partitionKey: null,
  });
  assert.equal(
    reason,
    `resolved topic "${"t".repeat(80)}…" is not a valid Iggy name (1-255 bytes)`,
  );
});

Deno.test("checkResolution() explains an empty resolved partition key", () => {
  assert.equal(
    checkResolution({ rule: 2, stream: "s", topic: "t", partitionKey: "" }),
    'resolved partition key "" is not a valid Iggy messages key (1-255 bytes)',
  );
});

import assert from "node:assert/strict";
import type { StoredMessage } from "../port.ts";
import { BatchEncoder, decodeBatch } from "./_batch.ts";

Deno.test("BatchEncoder grows past its first guess for headers and payloads, and round-trips", () => {
  const encoder = new BatchEncoder();
  encoder.begin(16); // far too small: every kind of growth happens
  const messages = Array.from({ length: 50 }, (_, i) => ({
    payload: new Uint8Array(i * 37 + 1).fill(i),
    headers: new Map([["mqtt.topic", `t/${i}/${"é".repeat(i * 3)}`], ["n", `${i}`]]),
  }));
  for (const m of messages) encoder.add(m, 1000);
  const data = new Uint8Array(encoder.take(), 0, encoder.position);
  const out: StoredMessage[] = [];
  decodeBatch(data, 0, 100, messages.length, 0, 1000, out);
  assert.equal(out.length, messages.length);
  out.forEach((m, i) => {
    assert.equal(m.offset, 100 + i);
    assert.deepEqual(m.payload, messages[i].payload);
    assert.deepEqual([...m.headers], [...messages[i].headers]);
  });
});

import assert from "node:assert/strict";
import {
  HEADER_SIZE,
  readEvictionHeader,
  readFrameKind,
  readFrameSize,
  readReplyHeader,
  writeRequestHeader,
} from "./header_layout.ts";

Deno.test("writeRequestHeader() puts each field at its byte offset and zeroes the rest", () => {
  const client = (0x0102030405060708n << 64n) | 0x1112131415161718n;
  const h = writeRequestHeader({
    bodyLength: 10,
    client,
    request: 7n,
    operation: 2,
    session: 0x99n,
    code: 300,
  });
  assert.equal(h.length, HEADER_SIZE);
  const v = new DataView(h.buffer);
  assert.equal(v.getUint32(48, true), 266, "size = header + body");
  assert.equal(h[60], 5, "command = Request");
  assert.equal(v.getBigUint64(128, true), 0x1112131415161718n, "client low half first");
  assert.equal(v.getBigUint64(136, true), 0x0102030405060708n, "client high half");
  assert.equal(v.getBigUint64(168, true), 7n, "request");
  assert.equal(h[176], 2, "operation");
  assert.equal(v.getBigUint64(184, true), 0x99n, "session");
  assert.equal(v.getUint32(196, true), 300, "command code in reserved[0..4]");
  const written = new Set<number>();
  for (const [at, n] of [[48, 4], [60, 1], [128, 16], [168, 8], [176, 1], [184, 8], [196, 4]]) {
    for (let i = 0; i < n; i++) written.add(at + i);
  }
  for (let i = 0; i < HEADER_SIZE; i++) {
    if (!written.has(i)) assert.equal(h[i], 0, `byte ${i} is zero`);
  }
});

Deno.test("writeRequestHeader() leaves the code slot empty for replicated operations", () => {
  const h = writeRequestHeader({
    bodyLength: 0,
    client: 1n,
    request: 0n,
    operation: 1,
    session: 0n,
  });
  assert.equal(new DataView(h.buffer).getUint32(196, true), 0);
});

Deno.test("readReplyHeader() reads size, request echo, operation echo and status", () => {
  const h = new Uint8Array(HEADER_SIZE);
  const v = new DataView(h.buffer);
  v.setUint32(48, 300, true);
  h[60] = 8;
  v.setBigUint64(200, 5n, true);
  h[208] = 160;
  v.setUint32(216, 3007, true);
  assert.equal(readFrameKind(h), 8);
  assert.equal(readFrameSize(h), 300);
  assert.deepEqual(readReplyHeader(h), { size: 300, request: 5n, operation: 160, status: 3007 });
});

Deno.test("readEvictionHeader() reads the reason at 255 and the version window at 144/148", () => {
  const h = new Uint8Array(HEADER_SIZE);
  const v = new DataView(h.buffer);
  h[60] = 13;
  v.setUint32(144, 0x3000, true);
  v.setUint32(148, 0x3000, true);
  h[255] = 14;
  assert.deepEqual(readEvictionHeader(h), {
    reason: 14,
    serverVersion: 0x3000,
    serverVersionMin: 0x3000,
  });
});

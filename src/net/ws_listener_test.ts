import assert from "node:assert/strict";
import { listenWs, MAX_HELD_BYTES, refusal, WsTransport } from "./ws_listener.ts";
import { ProtocolError } from "../codec/errors.ts";

/** What WsTransport uses of a WebSocket, driven by the test. */
class FakeSocket {
  binaryType = "blob";
  readyState = 1;
  onmessage: ((e: { data: unknown }) => void) | null = null;
  onclose: (() => void) | null = null;
  onerror: ((e: unknown) => void) | null = null;
  sent: Uint8Array[] = [];
  closedWith: number | undefined | null = null;
  send(b: Uint8Array) {
    this.sent.push(b);
  }
  close(code?: number) {
    this.closedWith ??= code;
    this.readyState = 3;
  }
  frame(data: unknown) {
    this.onmessage!({ data });
  }
}

function transport() {
  const s = new FakeSocket();
  const t = new WsTransport(s as unknown as WebSocket, "10.0.0.1");
  const got: number[] = [];
  let ended: unknown = "no";
  let reads = 0;
  t.start({ data: (c) => (reads++, got.push(...c)), end: (e) => ended = e });
  return { s, t, got, ended: () => ended, reads: () => reads };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

Deno.test("WsTransport: the frames of one tick are one read; frames held while paused come on resume, in order", async () => {
  const { s, t, got, reads } = transport();
  assert.equal(s.binaryType, "arraybuffer");
  s.frame(new Uint8Array([1, 2]).buffer);
  s.frame(new Uint8Array([3]).buffer);
  await tick();
  assert.deepEqual(got, [1, 2, 3]);
  assert.equal(reads(), 1);
  t.pause();
  s.frame(new Uint8Array([4]).buffer);
  s.frame(new Uint8Array([5, 6]).buffer);
  await tick();
  assert.deepEqual(got, [1, 2, 3]);
  t.resume();
  assert.deepEqual(got, [1, 2, 3, 4, 5, 6]);
});

Deno.test("WsTransport: more than 4 MiB held while paused closes the connection (1008); a text frame closes it (1003)", () => {
  const a = transport();
  a.t.pause();
  const mib = new Uint8Array(1024 * 1024).buffer;
  for (let i = 0; i < MAX_HELD_BYTES / (1024 * 1024); i++) a.s.frame(mib);
  assert.equal(a.s.closedWith, null); // exactly at the bound: still open
  a.s.frame(new Uint8Array(1).buffer);
  assert.equal(a.s.closedWith, 1008);
  assert.match(String(a.ended()), /4 MiB/);
  const b = transport();
  b.s.frame("CONNECT as text");
  assert.equal(b.s.closedWith, 1003);
  assert.match(String(b.ended()), /binary only/);
});

Deno.test("ws refusal(): path, upgrade, subprotocol and origin", () => {
  const o = { path: "/mqtt", allowedOrigins: ["https://a.example"] };
  const req = (path: string, h: Record<string, string>) =>
    new Request(`http://x${path}`, { headers: h });
  const up = { upgrade: "websocket", "sec-websocket-protocol": "mqttv3.1, mqtt" };
  assert.equal(refusal(req("/x", up), o)?.[0], 404);
  assert.equal(refusal(req("/mqtt", {}), o)?.[0], 426);
  assert.equal(refusal(req("/mqtt", { upgrade: "websocket" }), o)?.[0], 400);
  assert.equal(refusal(req("/mqtt", up), o)?.[0], 403); // no origin, origins configured
  assert.equal(refusal(req("/mqtt", { ...up, origin: "https://a.example" }), o), null);
  assert.equal(refusal(req("/mqtt", up), { ...o, allowedOrigins: [] }), null);
});

Deno.test("WsTransport: a frame that breaks RFC 6455 ends the connection with a ProtocolError; a peer gone mid-frame does not", () => {
  // Found by the WebSocket frame fuzz (tests/fuzz/ws_frames.ts): framing errors ended the
  // connection with a debug line and no count.
  const a = transport();
  a.s.onerror!(new ErrorEvent("error", { error: new Error("Reserved bits are not zero") }));
  const e = a.ended();
  assert.ok(e instanceof ProtocolError, String(e));
  assert.equal(e.rule, "RFC6455");
  assert.match(e.message, /WebSocket: Reserved bits are not zero/);
  const b = transport();
  b.s.onerror!(new ErrorEvent("error", { error: new Error("Unexpected EOF") }));
  assert.ok(!(b.ended() instanceof ProtocolError));
  const c = transport();
  c.s.frame("CONNECT as text");
  const text = c.ended();
  assert.ok(text instanceof ProtocolError && text.rule === "MQTT-6.0.0-1");
});

/** Sends `request` raw and returns the status line of the answer. */
async function statusLine(port: number, request: string): Promise<string> {
  const c = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await c.write(new TextEncoder().encode(request));
    const buf = new Uint8Array(4096);
    const n = await c.read(buf);
    return new TextDecoder().decode(buf.subarray(0, n ?? 0)).split("\r\n")[0];
  } finally {
    c.close();
  }
}

Deno.test("listenWs: an upgrade with a Host that is no host or without Sec-WebSocket-Key is a counted 400, not a 500 with a stack trace", async () => {
  // Found by the WebSocket fuzz (tests/fuzz/ws_frames.ts, mutated upgrade requests): the URL
  // parser and Deno.upgradeWebSocket threw in the handler.
  const refused: string[] = [];
  const l = await listenWs("127.0.0.1", 0, {
    path: "/mqtt",
    allowedOrigins: [],
    onRefused: (r) => refused.push(r),
  }, () => {});
  const head = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Protocol: mqtt\r\n";
  const key = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";
  try {
    const noKey = `GET /mqtt HTTP/1.1\r\nHost: 127.0.0.1\r\n${head}\r\n`;
    assert.equal(await statusLine(l.port, noKey), "HTTP/1.1 400 Bad Request");
    const badHost = `GET /mqtt HTTP/1.1\r\nHost: 127.0-0.1\r\n${head}${key}\r\n`;
    assert.equal(await statusLine(l.port, badHost), "HTTP/1.1 400 Bad Request");
    assert.equal(refused.length, 2);
    assert.match(refused[0], /bad upgrade request: .*sec-websocket-key/i);
    assert.match(refused[1], /bad upgrade request: Invalid URL/);
  } finally {
    l.close();
  }
});

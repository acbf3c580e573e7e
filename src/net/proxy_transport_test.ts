import assert from "node:assert/strict";
import { IpBlockSet } from "../base/ip.ts";
import type { Transport, TransportSink } from "../session/transport.ts";
import { memoryTransportPair } from "../../tests/helpers/memory_transport.ts";
import { ProxyAcceptor, type ProxyRefused } from "./proxy_transport.ts";

const text = (s: string) => new TextEncoder().encode(s);
const CONNECT = [0x10, 0x0c, 0x00, 0x04, ...text("MQTT"), 0x04, 0x02, 0x00, 0x3c, 0x00, 0x00];
const HEADER = text("PROXY TCP4 198.51.100.7 10.0.0.5 50000 1883\r\n");
const V2_LOCAL = [
  0x0d,
  0x0a,
  0x0d,
  0x0a,
  0x00,
  0x0d,
  0x0a,
  0x51,
  0x55,
  0x49,
  0x54,
  0x0a,
  0x20,
  0,
  0,
  0,
];

/** What a connection would see of a transport it started. */
class Recorder implements TransportSink {
  readonly bytes: number[] = [];
  ended = false;
  #waiters: (() => void)[] = [];
  data(chunk: Uint8Array): void {
    this.bytes.push(...chunk);
    this.#wake();
  }
  end(): void {
    this.ended = true;
    this.#wake();
  }
  async until(test: () => boolean): Promise<void> {
    while (!test()) await new Promise<void>((r) => this.#waiters.push(r));
  }
  #wake(): void {
    for (const w of this.#waiters.splice(0)) w();
  }
}

/** A ProxyAcceptor trusting 127.0.0.1, its accepted transports and refusals. */
function acceptor(o: { timeoutMs?: number; maxPending?: number } = {}) {
  const accepted: Transport[] = [];
  const refused: ProxyRefused[] = [];
  const events = new Recorder();
  const a = new ProxyAcceptor({
    trusted: new IpBlockSet(["127.0.0.1/32"]),
    timeoutMs: o.timeoutMs ?? 5000,
    maxPending: o.maxPending ?? 100,
    onRefused: (r) => {
      refused.push(r);
      events.data(new Uint8Array(0));
    },
  }, (t) => {
    accepted.push(t);
    events.data(new Uint8Array(0));
  });
  return { a, accepted, refused, events };
}

Deno.test("ProxyAcceptor: a trusted header names the client; the bytes after it reach the connection", async () => {
  const { a, accepted, events } = acceptor();
  const { transport, client } = memoryTransportPair("127.0.0.1");
  a.accept(transport);
  client.send([...HEADER, ...CONNECT.slice(0, 5)]);
  await events.until(() => accepted.length === 1);
  const t = accepted[0];
  assert.equal(t.remoteAddress, "198.51.100.7");
  assert.equal(a.pending, 0);
  const sink = new Recorder();
  t.start(sink);
  client.send(CONNECT.slice(5));
  await sink.until(() => sink.bytes.length === CONNECT.length);
  assert.deepEqual(sink.bytes, CONNECT);
  // Writes go to the socket unchanged.
  await t.write(Uint8Array.of(0x20, 0x02, 0x00, 0x00));
  assert.deepEqual(Array.from((await client.readPacket())!), [0x20, 0x02, 0x00, 0x00]);
});

Deno.test("ProxyAcceptor: a header trickled a byte per read is held until whole", async () => {
  const { a, accepted, events } = acceptor();
  const { transport, client } = memoryTransportPair("127.0.0.1");
  a.accept(transport);
  for (const b of HEADER) client.send([b]);
  for (const b of CONNECT) client.send([b]);
  await events.until(() => accepted.length === 1);
  assert.equal(accepted[0].remoteAddress, "198.51.100.7");
  const sink = new Recorder();
  accepted[0].start(sink);
  await sink.until(() => sink.bytes.length === CONNECT.length);
  assert.deepEqual(sink.bytes, CONNECT);
});

Deno.test("ProxyAcceptor: a connection paused by its first read gets nothing more until resumed", async () => {
  const { a, accepted, events } = acceptor();
  const { transport, client } = memoryTransportPair("127.0.0.1");
  a.accept(transport);
  client.send([...HEADER, ...CONNECT]);
  await events.until(() => accepted.length === 1);
  const t = accepted[0];
  const sink = new Recorder();
  sink.data = (chunk) => {
    Recorder.prototype.data.call(sink, chunk);
    t.pause();
  };
  t.start(sink);
  await sink.until(() => sink.bytes.length === CONNECT.length);
  client.send([0xc0, 0x00]); // PINGREQ
  await new Promise((r) => setTimeout(r, 0)); // the memory transport delivers in microtasks
  assert.equal(sink.bytes.length, CONNECT.length);
  t.resume();
  await sink.until(() => sink.bytes.length === CONNECT.length + 2);
});

Deno.test("ProxyAcceptor: v2 LOCAL (a balancer's health check) keeps the balancer's address", async () => {
  const { a, accepted, events } = acceptor();
  const { transport, client } = memoryTransportPair("127.0.0.1");
  a.accept(transport);
  client.send([...V2_LOCAL, ...CONNECT]);
  await events.until(() => accepted.length === 1);
  assert.equal(accepted[0].remoteAddress, "127.0.0.1");
});

Deno.test("ProxyAcceptor: a malformed header from a trusted source closes that connection, named", async () => {
  const { a, accepted, refused, events } = acceptor();
  const { transport, client } = memoryTransportPair("127.0.0.1");
  a.accept(transport);
  client.send(text("PROXY TCP4 198.51.100.7 10.0.0.5 50000\r\n"));
  await events.until(() => refused.length === 1);
  assert.equal(refused[0].why, "proxy_header");
  assert.equal(refused[0].remote, "127.0.0.1");
  assert.match(refused[0].reason, /is not 6 fields/);
  assert.ok(client.closed);
  assert.equal(accepted.length, 0);
  assert.equal(a.pending, 0);
});

Deno.test("ProxyAcceptor: plain MQTT from a trusted source is refused (the header is required)", async () => {
  const { a, refused, events } = acceptor();
  const { transport, client } = memoryTransportPair("127.0.0.1");
  a.accept(transport);
  client.send(CONNECT);
  await events.until(() => refused.length === 1);
  assert.equal(refused[0].why, "proxy_header");
  assert.ok(client.closed);
});

Deno.test("ProxyAcceptor: a header not whole within the timeout closes the connection", async () => {
  const { a, accepted, refused, events } = acceptor({ timeoutMs: 30 });
  const { transport, client } = memoryTransportPair("127.0.0.1");
  a.accept(transport);
  client.send(HEADER.subarray(0, 20));
  await events.until(() => refused.length === 1);
  assert.deepEqual(refused[0], {
    why: "proxy_timeout",
    remote: "127.0.0.1",
    reason: "no whole PROXY header within 30 ms",
  });
  assert.ok(client.closed);
  assert.equal(accepted.length, 0);
  assert.equal(a.pending, 0);
});

Deno.test("ProxyAcceptor: connections waiting for their header are bounded; a slot frees when one is read", async () => {
  const { a, accepted, refused, events } = acceptor({ maxPending: 2 });
  const pairs = [0, 1, 2].map(() => memoryTransportPair("127.0.0.1"));
  for (const p of pairs) a.accept(p.transport);
  assert.equal(a.pending, 2);
  assert.equal(refused.length, 1);
  assert.equal(refused[0].why, "proxy_pending");
  assert.ok(pairs[2].client.closed);
  pairs[0].client.send(HEADER);
  await events.until(() => accepted.length === 1);
  assert.equal(a.pending, 1);
  const next = memoryTransportPair("127.0.0.1");
  a.accept(next.transport);
  assert.equal(a.pending, 2);
  assert.equal(refused.length, 1);
  // One that goes away before its header frees its slot too, and is no refusal.
  pairs[1].client.end();
  next.client.end();
  await new Promise((r) => setTimeout(r, 0)); // past the microtasks that deliver the ends
  assert.equal(a.pending, 0);
  assert.equal(refused.length, 1);
});

Deno.test("ProxyAcceptor: an untrusted source's PROXY header is refused; its plain MQTT is not touched", async () => {
  const { a, accepted, refused, events } = acceptor();
  const spoofer = memoryTransportPair("192.0.2.9");
  a.accept(spoofer.transport);
  assert.equal(accepted.length, 1, "accepted at once: the gateway's limits apply first");
  const spoofed = new Recorder();
  accepted[0].start(spoofed);
  spoofer.client.send([...HEADER, ...CONNECT]);
  await events.until(() => refused.length === 1);
  assert.equal(refused[0].why, "proxy_untrusted");
  assert.equal(refused[0].remote, "192.0.2.9");
  assert.ok(spoofer.client.closed);
  assert.equal(spoofed.bytes.length, 0);

  const device = memoryTransportPair("192.0.2.10");
  a.accept(device.transport);
  const t = accepted[1];
  assert.equal(t.remoteAddress, "192.0.2.10");
  const sink = new Recorder();
  t.start(sink);
  device.client.send(CONNECT);
  device.client.send([0xc0, 0x00]);
  await sink.until(() => sink.bytes.length === CONNECT.length + 2);
  assert.deepEqual(sink.bytes, [...CONNECT, 0xc0, 0x00]);
  device.client.end();
  await sink.until(() => sink.ended);
});

Deno.test("ProxyAcceptor: each waiting connection gets its own deadline from the one timer", async () => {
  const { a, accepted, refused, events } = acceptor({ timeoutMs: 80 });
  const first = memoryTransportPair("127.0.0.1");
  a.accept(first.transport);
  await new Promise((r) => setTimeout(r, 40));
  const second = memoryTransportPair("127.0.0.1");
  a.accept(second.transport);
  await events.until(() => refused.length === 1);
  assert.ok(first.client.closed);
  assert.equal(a.pending, 1, "the second is not due with the first");
  second.client.send(HEADER);
  await events.until(() => accepted.length === 1);
  assert.equal(accepted[0].remoteAddress, "198.51.100.7");
  assert.equal(refused.length, 1);
  assert.equal(a.pending, 0);
});

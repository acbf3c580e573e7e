/**
 * The bound on bytes of partly received packets, all connections together: decoders take from
 * one PartialPacketBudget what they hold, give it back when a packet is whole or discarded, and
 * a read that would pass the bound is refused with DISCONNECT 0x89 Server busy.
 */
import assert from "node:assert/strict";
import { type DecoderLimits, PacketDecoder } from "./decoder.ts";
import { remainingLength as varint } from "./encoder.ts";
import { PartialPacketBudget, PartialPacketsFullError } from "./partial_packets.ts";
import type { PublishPacket } from "./packets.ts";

const MIB = 1024 * 1024;
const LIMITS: DecoderLimits = { maxPacketBytes: MIB, maxTopicBytes: 255, maxTopicLevels: 32 };

/** A QoS 1 PUBLISH to `t/big` with a payload of `size` bytes (byte i = i & 0xff). */
function bigPublish(size: number): Uint8Array {
  const body = new Uint8Array(2 + 5 + 2 + size);
  body.set([0, 5, ...new TextEncoder().encode("t/big"), 0, 7]);
  for (let i = 0; i < size; i++) body[9 + i] = i & 0xff;
  const len = varint(body.length);
  const out = new Uint8Array(1 + len.length + body.length);
  out[0] = 0x32;
  out.set(len, 1);
  out.set(body, 1 + len.length);
  return out;
}

/** An MQTT 3.1.1 CONNECT: client id "c", clean session, keep-alive 60 s. */
const CONNECT = new Uint8Array([0x10, 13, 0, 4, 0x4d, 0x51, 0x54, 0x54, 4, 2, 0, 60, 0, 1, 0x63]);

/** A decoder past its CONNECT, holding within `budget`. */
function connected(budget: PartialPacketBudget): PacketDecoder {
  const d = new PacketDecoder(LIMITS, undefined, budget);
  assert.equal(d.push(CONNECT).length, 1);
  return d;
}

Deno.test("PacketDecoder holds only the bytes that arrived of a 1 MiB packet, taken from the budget, and gives them back when it is whole", () => {
  const budget = new PartialPacketBudget(64 * MIB);
  const d = connected(budget);
  const whole = bigPublish(MIB - 16);
  // The fixed header announces 1 MiB; nothing of that size is allocated before it arrives.
  assert.deepEqual(d.push(whole.subarray(0, 10)), []);
  assert.equal(d.bufferedBytes, 10);
  assert.equal(budget.held, 10);
  let at = 10;
  for (; at + 64 * 1024 < whole.length; at += 64 * 1024) {
    assert.deepEqual(d.push(whole.subarray(at, at + 64 * 1024)), []);
    assert.equal(budget.held, at + 64 * 1024);
  }
  const [p] = d.push(whole.subarray(at)) as PublishPacket[];
  assert.equal(p.payload.length, MIB - 16);
  assert.equal(p.payload[MIB - 17], (MIB - 17) & 0xff);
  assert.equal(budget.held, 0);
  assert.equal(d.bufferedBytes, 0);
});

Deno.test("PacketDecoder refuses with 0x89 a read that would take the budget past its bound, and the refused read takes nothing", () => {
  const budget = new PartialPacketBudget(3 * 500_000);
  const whole = bigPublish(900_000);
  const part = whole.subarray(0, 400_000);
  const senders = [connected(budget), connected(budget), connected(budget)];
  for (const d of senders) d.push(part);
  assert.equal(budget.held, 1_200_000);
  const fourth = connected(budget);
  assert.throws(() => fourth.push(part), (err) => {
    assert.ok(err instanceof PartialPacketsFullError);
    assert.equal(err.reasonCode, 0x89);
    assert.match(err.message, /limits\.max_partial_packet_bytes_total 1500000/);
    return true;
  });
  assert.equal(budget.held, 1_200_000, "the refused read took nothing");
  fourth.discard();
  assert.equal(budget.held, 1_200_000);
  // One more held read past the bound is refused too; a sender that closes gives its bytes back.
  assert.throws(() => senders[0].push(whole.subarray(400_000, 800_000)), PartialPacketsFullError);
  senders[0].discard();
  senders[1].discard();
  assert.equal(budget.held, 400_000);
  assert.deepEqual(connected(budget).push(part), []);
  assert.equal(budget.held, 800_000);
});

Deno.test("PacketDecoder under a full budget still decodes packets that arrive whole in one read", () => {
  const budget = new PartialPacketBudget(1024);
  const hog = connected(budget);
  hog.push(bigPublish(2000).subarray(0, 1024));
  assert.equal(budget.held, 1024);
  const d = connected(budget);
  const [p] = d.push(bigPublish(100_000)) as PublishPacket[];
  assert.equal(p.payload.length, 100_000);
  assert.throws(() => d.push(bigPublish(10).subarray(0, 3)), PartialPacketsFullError);
});

Deno.test("PacketDecoder holding a packet that arrives a byte per read keeps one buffer of at most twice its bytes", () => {
  const budget = new PartialPacketBudget(64 * MIB);
  const d = connected(budget);
  const whole = bigPublish(256 * 1024);
  const before = Deno.memoryUsage().heapUsed + Deno.memoryUsage().external;
  for (let at = 0; at < whole.length - 1; at++) {
    assert.deepEqual(d.push(whole.subarray(at, at + 1)), []);
  }
  const grown = Deno.memoryUsage().heapUsed + Deno.memoryUsage().external - before;
  assert.equal(budget.held, whole.length - 1);
  // A copy kept per read cost ~200 bytes a byte here (over 50 MB); one doubling buffer at most
  // twice the packet, with room left for what the loop itself leaves to the collector.
  assert.ok(grown < 8 * MIB, `held a 256 KiB packet in ${grown} bytes`);
  const [p] = d.push(whole.subarray(whole.length - 1)) as PublishPacket[];
  assert.equal(p.payload.length, 256 * 1024);
  assert.equal(p.payload[256 * 1024 - 1], (256 * 1024 - 1) & 0xff);
  assert.equal(budget.held, 0);
});

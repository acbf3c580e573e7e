/**
 * EarlyRefusals: a refused MQTT 5 CONNECT gets its CONNACK reason code, anything else a close;
 * at most MAX_REFUSING sockets are read at once, the rest closed at once.
 */
import assert from "node:assert/strict";
import { memoryTransportPair } from "../../tests/helpers/memory_transport.ts";
import { connectLevel, EarlyRefusals, MAX_REFUSING } from "./refuse_early.ts";

const V5_CONNECT = [0x10, 13, 0, 4, 0x4d, 0x51, 0x54, 0x54, 5, 2, 0, 60, 0, 0, 0];
const V4_CONNECT = [0x10, 12, 0, 4, 0x4d, 0x51, 0x54, 0x54, 4, 2, 0, 60, 0, 0];

Deno.test("connectLevel() reads the protocol level from a CONNECT's first bytes", () => {
  assert.equal(connectLevel(new Uint8Array(V5_CONNECT)), 5);
  assert.equal(connectLevel(new Uint8Array(V4_CONNECT)), 4);
  assert.equal(connectLevel(new Uint8Array(V5_CONNECT.slice(0, 5))), undefined); // more, please
  assert.equal(connectLevel(new Uint8Array([0x30, 0])), null); // not a CONNECT
  assert.equal(
    connectLevel(new Uint8Array([0x10, 12, 0, 6, 0x4d, 0x51, 0x49, 0x73, 0x64, 0x70, 3, 2])),
    null,
  );
});

Deno.test("EarlyRefusals.refuse(): a v5 CONNECT gets CONNACK 0x97 with a reason, a 3.1.1 one only a close", async () => {
  const refusals = new EarlyRefusals(true);
  const v5 = memoryTransportPair();
  refusals.refuse(v5.transport, 0x97, "max_connections reached");
  v5.client.send(V5_CONNECT);
  const connack = await v5.client.readPacket();
  assert.deepEqual([connack![0], connack![2], connack![3]], [0x20, 0, 0x97]);
  assert.match(new TextDecoder().decode(connack!), /max_connections reached/);
  await v5.client.closedByGateway();
  const v4 = memoryTransportPair();
  refusals.refuse(v4.transport, 0x97, "max_connections reached");
  v4.client.send(V4_CONNECT);
  assert.equal(await v4.client.readPacket(), null);
});

Deno.test(`EarlyRefusals.refuse(): beyond ${MAX_REFUSING} sockets being read, the next is closed at once`, async () => {
  const refusals = new EarlyRefusals(true);
  const held = Array.from({ length: MAX_REFUSING }, () => memoryTransportPair());
  for (const p of held) refusals.refuse(p.transport, 0x97, "full");
  const extra = memoryTransportPair();
  refusals.refuse(extra.transport, 0x97, "full");
  extra.client.send(V5_CONNECT);
  assert.equal(await extra.client.readPacket(), null, "closed without a CONNACK");
  for (const p of held) p.client.end(); // the held ones end: their timers are cleared
  for (const p of held) await p.client.closedByGateway();
  const after = memoryTransportPair();
  refusals.refuse(after.transport, 0x97, "full");
  after.client.send(V5_CONNECT);
  assert.equal((await after.client.readPacket())?.[3], 0x97, "room again");
});

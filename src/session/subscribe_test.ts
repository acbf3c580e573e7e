/**
 * SUBSCRIBE and UNSUBSCRIBE handling over in-memory transports: the real gateway and a
 * temporary embedded store, no sockets.
 */
import assert from "node:assert/strict";
import {
  connectPacket,
  publishPacket,
  subscribePacket,
  waitFor,
} from "../../tests/helpers/gateway.ts";
import { startMemoryGateway } from "../../tests/helpers/memory_gateway.ts";
import { SpyBackend } from "../../tests/helpers/spy_backend.ts";

Deno.test("handleSubscribe(): SUBACK grants QoS 2 as asked, a wildcard filter, and 0x80 for a misplaced '#'", async () => {
  const gw = await startMemoryGateway();
  try {
    const c = await gw.connect("sub-1");
    c.send(
      subscribePacket(5, [["sensors/s1/data", 2], ["sensors/+/data", 0], ["a/#/b", 0], ["a/b", 0]]),
    );
    assert.deepEqual([...(await c.readPacket())!], [0x90, 6, 0, 5, 2, 0, 0x80, 0]);
  } finally {
    await gw.stop();
  }
});

Deno.test("a subscriber gets a message published after its SUBACK, with the exact topic", async () => {
  const gw = await startMemoryGateway();
  try {
    const sub = await gw.connect("sub-1");
    sub.send(subscribePacket(1, [["sensors/s1/data", 0]]));
    assert.deepEqual([...(await sub.readPacket())!], [0x90, 3, 0, 1, 0]);
    const pub = await gw.connect("pub-1");
    pub.send(publishPacket("sensors/s1/data", "21.5", 0));
    const got = (await sub.readPacket())!;
    assert.deepEqual([...got], [...publishPacket("sensors/s1/data", "21.5", 0)]);
  } finally {
    await gw.stop();
  }
});

Deno.test("handleUnsubscribe(): UNSUBACK, and later messages are not delivered (barrier: PINGRESP)", async () => {
  const gw = await startMemoryGateway();
  try {
    const sub = await gw.connect("sub-1");
    sub.send(subscribePacket(1, [["sensors/s1/data", 1]]));
    assert.deepEqual([...(await sub.readPacket())!], [0x90, 3, 0, 1, 1]);
    const filter = new TextEncoder().encode("sensors/s1/data");
    const body = [0, 2, 0, filter.length, ...filter];
    sub.send([0xa2, body.length, ...body]);
    assert.deepEqual([...(await sub.readPacket())!], [0xb0, 2, 0, 2]);
    const pub = await gw.connect("pub-1");
    pub.send(publishPacket("sensors/s1/data", "x", 1, 1));
    assert.deepEqual([...(await pub.readPacket())!], [0x40, 2, 0, 1]);
    sub.send([0xc0, 0]);
    assert.deepEqual([...(await sub.readPacket())!], [0xd0, 0]);
  } finally {
    await gw.stop();
  }
});

Deno.test("handleSubscribe(): a stored session's SUBACK waits until its record is stored (a power cut must not lose the filters)", async () => {
  let spy: SpyBackend | undefined;
  const gw = await startMemoryGateway({ wrapBackend: (b) => spy = new SpyBackend(b) });
  try {
    const c = gw.open();
    c.send(connectPacket("keeper", { clean: false }));
    assert.deepEqual([...(await c.readPacket())!], [0x20, 2, 0, 0]);
    await gw.view.storedSessionsIdle(); // the CONNECT's record
    spy!.holding = true; // the session record of the SUBSCRIBE reaches the log on release
    c.send(subscribePacket(1, [["sensors/+/data", 1]]));
    await waitFor(() => spy!.heldCount > 0, 5000, "the record's append");
    await new Promise((r) => setTimeout(r, 0)); // a turn: a SUBACK pushed at once is written by now
    await assert.rejects(c.readPacket(0), /no output/, "no SUBACK while its record is held");
    spy!.release();
    assert.deepEqual([...(await c.readPacket())!], [0x90, 3, 0, 1, 1]);
  } finally {
    spy?.release();
    await gw.stop();
  }
});

Deno.test("handleUnsubscribe(): a stored session's UNSUBACK waits until its record is stored (a power cut must not bring the filter back)", async () => {
  let spy: SpyBackend | undefined;
  const gw = await startMemoryGateway({ wrapBackend: (b) => spy = new SpyBackend(b) });
  try {
    const c = gw.open();
    c.send(connectPacket("keeper", { clean: false }));
    assert.deepEqual([...(await c.readPacket())!], [0x20, 2, 0, 0]);
    c.send(subscribePacket(1, [["sensors/+/data", 1]]));
    assert.deepEqual([...(await c.readPacket())!], [0x90, 3, 0, 1, 1]);
    await gw.view.storedSessionsIdle();
    spy!.holding = true; // the session record of the UNSUBSCRIBE reaches the log on release
    const filter = new TextEncoder().encode("sensors/+/data");
    const body = [0, 2, 0, filter.length, ...filter];
    c.send([0xa2, body.length, ...body]);
    await waitFor(() => spy!.heldCount > 0, 5000, "the record's append");
    await new Promise((r) => setTimeout(r, 0)); // a turn: a UNSUBACK pushed at once is written by now
    await assert.rejects(c.readPacket(0), /no output/, "no UNSUBACK while its record is held");
    spy!.release();
    assert.deepEqual([...(await c.readPacket())!], [0xb0, 2, 0, 2]);
  } finally {
    spy?.release();
    await gw.stop();
  }
});

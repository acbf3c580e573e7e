/**
 * SUBSCRIBE and UNSUBSCRIBE handling over in-memory transports: the real gateway and a
 * temporary embedded store, no sockets.
 */
import assert from "node:assert/strict";
import { publishPacket, subscribePacket } from "../../tests/helpers/gateway.ts";
import { startMemoryGateway } from "../../tests/helpers/memory_gateway.ts";

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

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
    sub.send(unsubscribeOne("sensors/s1/data"));
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

/** The SUBACK of packet id 1 granting QoS 1. */
const SUBACK_1 = [0x90, 3, 0, 1, 1];

/** An UNSUBSCRIBE of one filter (packet id 2). */
function unsubscribeOne(filter: string): number[] {
  const bytes = new TextEncoder().encode(filter);
  const body = [0, 2, 0, bytes.length, ...bytes];
  return [0xa2, body.length, ...body];
}

/**
 * A stored session ("keeper") sends `packet` once the `before` exchanges are answered; its
 * answer must wait while the session record the packet makes is held on its way to the log
 * (a power cut after the answer must find the record), then come as `answer`.
 */
async function answerWaitsForRecord(
  what: string,
  before: [Uint8Array | number[], number[]][],
  packet: Uint8Array | number[],
  answer: number[],
): Promise<void> {
  let spy: SpyBackend | undefined;
  const gw = await startMemoryGateway({ wrapBackend: (b) => spy = new SpyBackend(b) });
  try {
    const c = gw.open();
    c.send(connectPacket("keeper", { clean: false }));
    assert.deepEqual([...(await c.readPacket())!], [0x20, 2, 0, 0]);
    for (const [sent, reply] of before) {
      c.send(sent);
      assert.deepEqual([...(await c.readPacket())!], reply);
    }
    await gw.view.storedSessionsIdle(); // the records so far
    spy!.holding = true; // the record `packet` makes reaches the log on release
    c.send(packet);
    await waitFor(() => spy!.heldCount > 0, 5000, "the record's append");
    await new Promise((r) => setTimeout(r, 0)); // a turn: an answer pushed at once is written by now
    await assert.rejects(c.readPacket(0), /no output/, `no ${what} while its record is held`);
    spy!.release();
    assert.deepEqual([...(await c.readPacket())!], answer);
  } finally {
    spy?.release();
    await gw.stop();
  }
}

Deno.test("handleSubscribe(): a stored session's SUBACK waits until its record is stored (a power cut must not lose the filters)", () =>
  answerWaitsForRecord("SUBACK", [], subscribePacket(1, [["sensors/+/data", 1]]), SUBACK_1));

Deno.test("handleUnsubscribe(): a stored session's UNSUBACK waits until its record is stored (a power cut must not bring the filter back)", () =>
  answerWaitsForRecord(
    "UNSUBACK",
    [[subscribePacket(1, [["sensors/+/data", 1]]), SUBACK_1]],
    unsubscribeOne("sensors/+/data"),
    [0xb0, 2, 0, 2],
  ));

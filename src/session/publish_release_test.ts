/**
 * A backend that lets go of an append's messages once encoded (`RemoteTuning.releasesMessages`,
 * the Iggy backend): the session drops its own references at once unless delivery wants the
 * messages (a reader of the partition, a wildcard subscription). The probe is the embedded log
 * saying it releases them; whether the session kept a batch shows in its request array after
 * the receipt: the session empties what it kept (`release`), and leaves alone what it dropped.
 */
import assert from "node:assert/strict";
import { publishPacket, subscribePacket } from "../../tests/helpers/gateway.ts";
import { type MemoryGateway, startMemoryGateway } from "../../tests/helpers/memory_gateway.ts";
import type { AppendRequest, LogBackend } from "../log/port.ts";
import type { SharedReader } from "../delivery/reader.ts";
import { tripleKey } from "../delivery/registry.ts";
import type { MemoryClient } from "../../tests/helpers/memory_transport.ts";

/** Per append through the probe: its message count, and its request array's length after. */
interface Probe {
  readonly appends: { sent: number; after: number }[];
  /** Per append: resolved once the probe has looked (`after` is set). */
  readonly looked: Promise<void>[];
}

function releasing(probe: Probe): (inner: LogBackend) => LogBackend {
  return (inner) =>
    new Proxy(inner, {
      get(target, key) {
        if (key === "remote") return { placesBalanced: false, releasesMessages: true };
        if (key === "append") {
          return (request: AppendRequest) => {
            const seen = { sent: request.messages.length, after: -1 };
            const look = Promise.withResolvers<void>();
            const appended = target.append(request);
            // After the session's own answer to the receipt (which empties what it kept).
            const lookAfter = () => {
              seen.after = request.messages.length;
              look.resolve();
            };
            appended.then(() => setTimeout(lookAfter), () => look.resolve());
            probe.appends.push(seen);
            probe.looked.push(look.promise);
            return appended;
          };
        }
        const value = Reflect.get(target, key, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
}

/** Runs `body` against a memory gateway whose backend is the releasing probe; stops it after. */
async function withProbe(body: (gw: MemoryGateway, probe: Probe) => Promise<void>): Promise<void> {
  const probe: Probe = { appends: [], looked: [] };
  const gw = await startMemoryGateway({ wrapBackend: releasing(probe) });
  try {
    await body(gw, probe);
  } finally {
    await gw.stop();
  }
}

/** A client subscribed to `filter` at QoS 0 (its SUBACK read). */
async function subscribed(gw: MemoryGateway, filter: string): Promise<MemoryClient> {
  const sub = await gw.connect("sub-1");
  sub.send(subscribePacket(1, [[filter, 0]]));
  assert.deepEqual([...(await sub.readPacket())!], [0x90, 3, 0, 1, 0]);
  return sub;
}

/** Reads the next packet: the QoS 0 copy of publishOne's message on `topic`. */
async function deliveredOn(sub: MemoryClient, topic: string): Promise<void> {
  assert.deepEqual([...(await sub.readPacket())!], [...publishPacket(topic, "21.5", 0)]);
}

/** Publishes one QoS 1 message, waits for its PUBACK and for the probe's look after it. */
async function publishOne(
  pub: MemoryClient,
  probe: Probe,
  topic: string,
  id: number,
): Promise<void> {
  pub.send(publishPacket(topic, "21.5", 1, id));
  assert.deepEqual([...(await pub.readPacket())!], [0x40, 2, 0, id]);
  await Promise.all(probe.looked);
}

Deno.test("releasesMessages: with nobody subscribed the session drops an append's messages at once; stored and PUBACKed", () =>
  withProbe(async (gw, probe) => {
    const pub = await gw.connect("pub-1");
    await publishOne(pub, probe, "sensors/s1/data", 1);
    assert.deepEqual(probe.appends, [{ sent: 1, after: 1 }], "dropped, not emptied");
    const backend = gw.view.log;
    const info = (await backend.getTopic("sensors", "sensor_data"))!;
    let stored = 0;
    for (let partition = 0; partition < info.partitions; partition++) {
      stored += (await backend.poll({ stream: "sensors", topic: "sensor_data", partition }, 0, 10))
        .length;
    }
    assert.equal(stored, 1);
  }));

Deno.test("releasesMessages: a reader of the partition keeps them, and its subscriber gets the message", () =>
  withProbe(async (gw, probe) => {
    const sub = await subscribed(gw, "sensors/s1/data");
    const pub = await gw.connect("pub-1");
    await publishOne(pub, probe, "sensors/s1/data", 1);
    await deliveredOn(sub, "sensors/s1/data");
    assert.deepEqual(probe.appends, [{ sent: 1, after: 0 }], "kept for delivery, then emptied");
    // A partition of another topic has no reader: its append's messages are dropped.
    await publishOne(pub, probe, "building/b1/room/1/temp", 2);
    assert.deepEqual(probe.appends[1], { sent: 1, after: 1 });
  }));

Deno.test("releasesMessages: a wildcard subscription keeps them, and joins a topic first published after its SUBSCRIBE", () =>
  withProbe(async (gw, probe) => {
    const sub = await subscribed(gw, "sensors/+/data");
    const pub = await gw.connect("pub-1");
    await publishOne(pub, probe, "sensors/s7/data", 1);
    await deliveredOn(sub, "sensors/s7/data");
    assert.deepEqual(probe.appends, [{ sent: 1, after: 0 }]);
  }));

Deno.test("Delivery.notifyAppended without messages wakes the partition's reader to poll them", async () => {
  const gw = await startMemoryGateway();
  try {
    const calls: string[] = [];
    const fake = {
      signal: () => calls.push("signal"),
      offerAppended: (base: number, m: readonly unknown[]) =>
        calls.push(`offer ${base} ${m.length}`),
    } as unknown as SharedReader;
    const address = { stream: "sensors", topic: "sensor_data", partition: 0 };
    const delivery = gw.gateway.delivery;
    delivery.readers.set(tripleKey(address), fake);
    try {
      assert.equal(delivery.wantsAppended(address), true);
      assert.equal(delivery.wantsAppended({ ...address, partition: 1 }), false);
      assert.equal(delivery.wantsAppended({ ...address, partition: 1, balancedOver: 3 }), true);
      delivery.notifyAppended(address, 5, []);
      const m = { payload: new Uint8Array([1]), headers: new Map([["mqtt.topic", "x"]]) };
      delivery.notifyAppended(address, 5, [m]);
      assert.deepEqual(calls, ["signal", "offer 5 1"]);
    } finally {
      delivery.readers.delete(tripleKey(address));
    }
  } finally {
    await gw.stop();
  }
});

/**
 * PUBLISH handling (P2–P7) over in-memory transports: the real gateway and a temporary
 * embedded store, no sockets.
 */
import assert from "node:assert/strict";
import { publishPacket } from "../../tests/helpers/gateway.ts";
import { type MemoryGateway, startMemoryGateway } from "../../tests/helpers/memory_gateway.ts";
import type { StoredMessage } from "../log/port.ts";

/** Every stored message of stream/topic, all partitions. */
async function stored(gw: MemoryGateway, stream: string, topic: string): Promise<StoredMessage[]> {
  const backend = gw.view.log;
  const info = await backend.getTopic(stream, topic);
  if (info === null) return [];
  const all: StoredMessage[] = [];
  for (let partition = 0; partition < info.partitions; partition++) {
    all.push(...await backend.poll({ stream, topic, partition }, 0, 1000));
  }
  return all;
}

function puback(id: number): number[] {
  return [0x40, 2, id >> 8, id & 0xff];
}

Deno.test("ConnectionPublisher: a QoS 1 PUBLISH is stored with its mqtt.* headers, then PUBACKed", async () => {
  const gw = await startMemoryGateway();
  try {
    const c = await gw.connect("dev-1");
    c.send(publishPacket("sensors/s1/data", "21.5", 1, 7));
    assert.deepEqual([...(await c.readPacket())!], puback(7));
    // No PUBACK without a confirmed append: the message is in the log by now.
    const msgs = await stored(gw, "sensors", "sensor_data");
    assert.equal(msgs.length, 1);
    assert.equal(new TextDecoder().decode(msgs[0].payload), "21.5");
    assert.equal(msgs[0].headers.get("mqtt.topic"), "sensors/s1/data");
    assert.equal(msgs[0].headers.get("mqtt.client_id"), "dev-1");
    assert.equal(msgs[0].headers.get("mqtt.packet_id"), "7");
  } finally {
    await gw.stop();
  }
});

Deno.test("ConnectionPublisher: PUBACKs of one read leave in arrival order across partitions", async () => {
  const gw = await startMemoryGateway();
  try {
    const c = await gw.connect("dev-1");
    const ids = [11, 12, 13, 14, 15, 16];
    const read = ids.map((id) => [...publishPacket(`sensors/s${id}/data`, "x", 1, id)]).flat();
    c.send(read);
    for (const id of ids) assert.deepEqual([...(await c.readPacket())!], puback(id));
    assert.equal((await stored(gw, "sensors", "sensor_data")).length, ids.length);
  } finally {
    await gw.stop();
  }
});

Deno.test("ConnectionPublisher: QoS 0 is appended with no answer (barrier: PINGRESP comes next)", async () => {
  const gw = await startMemoryGateway();
  try {
    const c = await gw.connect("dev-1");
    // Same topic, same partition: the QoS 1 PUBACK means the QoS 0 message before it is stored.
    c.send([...publishPacket("sensors/s1/data", "a", 0), 0xc0, 0]);
    c.send(publishPacket("sensors/s1/data", "b", 1, 3));
    assert.deepEqual([...(await c.readPacket())!], [0xd0, 0]);
    assert.deepEqual([...(await c.readPacket())!], puback(3));
    const msgs = await stored(gw, "sensors", "sensor_data");
    assert.deepEqual(msgs.map((m) => m.headers.get("mqtt.qos")), ["0", "1"]);
  } finally {
    await gw.stop();
  }
});

Deno.test("ConnectionPublisher: a denied QoS 1 PUBLISH gets no PUBACK and closes the connection [MQTT-3.3.5-2]", async () => {
  const gw = await startMemoryGateway();
  try {
    const c = await gw.connect("dev-1");
    c.send(publishPacket("sensors/s1/data", "ok", 1, 1));
    c.send(publishPacket("$SYS/x", "no", 1, 2));
    assert.deepEqual([...(await c.readPacket())!], puback(1));
    assert.equal(await c.readPacket(), null);
    assert.match(gw.view.prometheus(), /outcome="denied"\S* 1/);
  } finally {
    await gw.stop();
  }
});

Deno.test("Connection.drain(): a graceful stop sends the PUBACKs of appends in flight, then closes", async () => {
  const gw = await startMemoryGateway();
  try {
    const c = await gw.connect("dev-1");
    // Barrier: once PINGRESP is here the PUBLISH was handled; its append may be in flight.
    c.send([...publishPacket("sensors/s1/data", "last", 1, 9), 0xc0, 0]);
    assert.deepEqual([...(await c.readPacket())!], [0xd0, 0]);
    const stopping = gw.stop();
    assert.deepEqual([...(await c.readPacket())!], puback(9));
    assert.equal(await c.readPacket(), null);
    await stopping;
  } finally {
    await gw.stop();
  }
});

Deno.test("ConnectionPublisher (3.1.1): after an append fails, what the connection sent after it is not appended (nor PUBACKed): its order survives the resend", async () => {
  const { MessageLog } = await import("../log/embedded/_message_log.ts");
  const { BackendError } = await import("../log/port.ts");
  const append = MessageLog.prototype.append;
  const gate = Promise.withResolvers<void>();
  const firstWrite = Promise.withResolvers<void>();
  let calls = 0;
  // The first transaction waits at the gate, then fails as on a full disk.
  MessageLog.prototype.append = async function (this: typeof MessageLog.prototype, ...args) {
    if (calls++ > 0) return await append.apply(this, args);
    firstWrite.resolve();
    await gate.promise;
    throw new BackendError("full", "The disk holding the test's store is full");
  };
  const gw = await startMemoryGateway();
  try {
    const c = await gw.connect("dev-1");
    c.send(publishPacket("sensors/s1/data", "1", 1, 1));
    await firstWrite.promise; // packet 1 is being written
    c.send([2, 3].flatMap((id) => [...publishPacket("sensors/s1/data", String(id), 1, id)]));
    // A barrier: the PINGRESP after 2 and 3 means both were read and queued behind packet 1.
    c.send([0xc0, 0]);
    assert.deepEqual([...(await c.readPacket())!], [0xd0, 0]);
    gate.resolve();
    assert.equal(await c.readPacket(), null, "closed without a PUBACK");
    const again = await gw.connect("dev-1");
    again.send(publishPacket("sensors/s1/data", "1", 1, 1)); // the device resends from 1 on
    assert.deepEqual([...(await again.readPacket())!], puback(1));
    const payloads = (await stored(gw, "sensors", "sensor_data")).map((m) =>
      new TextDecoder().decode(m.payload)
    );
    assert.deepEqual(payloads, ["1"], "2 and 3 were not appended before the resend of 1");
  } finally {
    MessageLog.prototype.append = append;
    await gw.stop();
  }
});

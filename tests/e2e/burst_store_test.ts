/**
 * A device reconnecting with its buffer: a burst of 64 KiB PUBLISHes (QoS 0, then QoS 1, from
 * MQTT.js) into a small embedded store, through a real gateway process. The store takes what
 * its room holds (a group commit bigger than the active segment's room goes as several
 * transactions, not refused whole); only what finds no room is refused (MQTT 5: 0x97); after a
 * SIGKILL every PUBACKed message is read back, in the order sent.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { type GatewayProcess, spawnGateway } from "../helpers/process.ts";
import { openStoreReadOnly, removeStore } from "../helpers/store.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const MIB = 1024 * 1024;
const STORE_BYTES = 8 * MIB;
const PAYLOAD_BYTES = 64 * 1024;
const QOS0 = 40;
const QOS1 = 200;
const TARGET = { stream: "sensors", topic: "messages_default" };

/** A 64 KiB payload whose first bytes say which message it is. */
function payload(n: number): Uint8Array {
  const bytes = new Uint8Array(PAYLOAD_BYTES).fill(0x61);
  new DataView(bytes.buffer).setUint32(0, n, true);
  return bytes;
}

/**
 * Publishes `count` messages as fast as the protocol allows: QoS 0 all at once, QoS 1 with up
 * to the CONNACK's Receive Maximum unanswered (the gateway's
 * `limits.max_inflight_publishes_per_client`, 64); resolves with each one's outcome (0, or the
 * PUBACK's reason code).
 */
async function publishBurst(client: mqtt.MqttClient, first: number, count: number, qos: 0 | 1) {
  const window = qos === 0 ? count : 64;
  const outcomes: number[] = [];
  let next = 0;
  const sendNext = (): Promise<void> | undefined => {
    if (next >= count) return;
    const i = next++;
    return new Promise<void>((resolve) => {
      const body = payload(first + i) as unknown as Buffer;
      client.publish("burst/device-1/data", body, { qos }, (err) => {
        outcomes[i] = err ? ((err as { code?: number }).code ?? -1) : 0;
        resolve();
      });
    }).then(sendNext);
  };
  await Promise.all(Array.from({ length: window }, sendNext));
  return outcomes;
}

/** The message numbers in each of the store's target partitions, in offset order. */
async function storedNumbers(db: string): Promise<number[][]> {
  const store = await openStoreReadOnly(db);
  try {
    const info = await store.getTopic(TARGET.stream, TARGET.topic);
    assert.ok(info, "target topic exists");
    const numbers: number[][] = [];
    for (let partition = 0; partition < info.partitions; partition++) {
      const inPartition: number[] = [];
      numbers.push(inPartition);
      for (let from = 0;;) {
        const msgs = await store.poll({ ...TARGET, partition }, from, 1000);
        if (msgs.length === 0) break;
        for (const m of msgs) {
          inPartition.push(new DataView(m.payload.buffer, m.payload.byteOffset).getUint32(0, true));
        }
        from = msgs.at(-1)!.offset + 1;
      }
    }
    return numbers;
  } finally {
    await store.close();
  }
}

Deno.test({
  name:
    "burst of 64 KiB PUBLISHes into an 8 MiB store: all QoS 0 and the QoS 1 that fit are stored, the rest refused 0x97; all read back after SIGKILL",
  async fn() {
    await Deno.mkdir(`${ROOT}data`, { recursive: true });
    const db = `data/burst-${crypto.randomUUID()}.db`;
    let gw: GatewayProcess | undefined;
    try {
      gw = await spawnGateway({
        IGGY_MQTT_EMBEDDED_PATH: db,
        IGGY_MQTT_EMBEDDED_MAX_STORE_BYTES: String(STORE_BYTES),
      });
      const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
        clientId: "device-1",
        protocolVersion: 5,
        reconnectPeriod: 0,
      });
      // QoS 0 first (2.6 MiB: the store has room for all), then QoS 1 (12.8 MiB: more than the
      // store): the QoS 1 PUBACKs come after the QoS 0 messages' appends (one connection).
      const qos0 = publishBurst(client, 0, QOS0, 0);
      const qos1 = await publishBurst(client, QOS0, QOS1, 1);
      await qos0;
      const acked = qos1.flatMap((code, i) => code === 0 ? [QOS0 + i] : []);
      const refused = qos1.filter((code) => code !== 0);
      assert.ok(refused.every((code) => code === 0x97), `refusals: ${[...new Set(refused)]}`);
      // 8 MiB holds 127 such messages with their framing: the store is used to at least 90 %
      // before anything is refused.
      const stored = QOS0 + acked.length;
      assert.ok(stored >= 115, `only ${stored} messages (${acked.length} QoS 1) stored`);
      await client.endAsync();
      gw.child.kill("SIGKILL");
      await gw.child.status;
      gw = undefined;

      // The target topic's partitions share the messages; each holds its own in the order sent.
      const partitions = await storedNumbers(`${ROOT}${db}`);
      for (const p of partitions) assert.deepEqual(p, [...p].sort((a, b) => a - b), "in order");
      const found = partitions.flat().sort((a, b) => a - b);
      const qos0Found = found.filter((n) => n < QOS0);
      assert.deepEqual(qos0Found, Array.from({ length: QOS0 }, (_, i) => i), "every QoS 0");
      const foundSet = new Set(found);
      assert.deepEqual(acked.filter((n) => !foundSet.has(n)), [], "every PUBACKed message");
    } finally {
      if (gw) {
        gw.child.kill("SIGKILL");
        await gw.child.status;
      }
      await removeStore(`${ROOT}${db}`);
    }
  },
});

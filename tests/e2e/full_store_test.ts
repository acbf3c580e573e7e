/**
 * A full embedded store seen from devices (MQTT.js 3.1.1 and 5) and from the operator (/ready,
 * /status.json, the log): `/ready` is 200 again only when the log has room for a message of the
 * largest size, not after any small commit that still fits; its two causes (the log at
 * `embedded.max_store_bytes`, the disk holding it) are judged each on its own, so freeing one
 * never hides the other, and each is logged and listed; a QoS 0 PUBLISH refused by a full store
 * is dropped and counted by reason, and its connection stays (the device would only reconnect
 * into the same full store), while QoS 1 on it gets PUBACK 0x97 (MQTT 5).
 *
 * The disk part needs root to mount (tests/helpers/small_disk.ts); skipped loudly elsewhere.
 */
import assert from "node:assert/strict";
import mqtt, { type MqttClient } from "mqtt";
import type { EmbeddedBackend } from "../../src/log/embedded/mod.ts";
import { startGateway, type TestGateway, waitFor } from "../helpers/gateway.ts";
import { mqttjsPing } from "./_subscribe_helpers.ts";
import { mountSmallDisk, SMALL_DISK_NOTE, SMALL_DISK_SKIP } from "../helpers/small_disk.ts";
import { DISK_RESERVE_BYTES } from "../../src/log/embedded/_disk_room.ts";
import { segmentBase } from "../../src/log/embedded/_log_segment.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const TOPIC = "sensors/full/data";
/** A reading of a camera-ish device: realistic, and well under max_packet_bytes. */
const PAYLOAD = "p".repeat(7_000);
const QUOTA_EXCEEDED = 0x97;

async function ready(gw: TestGateway): Promise<{ status: number; body: string }> {
  const r = await fetch(`http://127.0.0.1:${gw.httpPort}/ready`);
  return { status: r.status, body: JSON.stringify(await r.json()) };
}

/** The causes /ready names for a full store. */
async function readyCauses(gw: TestGateway): Promise<string[]> {
  const { body } = await ready(gw);
  const causes = [];
  if (/max_store_bytes reached/.test(body)) causes.push("max_store_bytes");
  if (/The disk holding .* has \d+ bytes free, less/.test(body)) causes.push("disk");
  return causes;
}

/** The causes /status.json lists for a full store. */
async function fullCauses(gw: TestGateway): Promise<string[]> {
  const s = await (await fetch(`http://127.0.0.1:${gw.httpPort}/status.json`)).json();
  return s.store.full_causes.map((c: { cause: string }) => c.cause);
}

function client(gw: TestGateway, v: 4 | 5): Promise<MqttClient> {
  return mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
    reconnectPeriod: 0,
    protocolVersion: v,
  });
}

/** A QoS 1 publish's PUBACK reason code (0 = stored). */
async function publish1(c: MqttClient, payload = PAYLOAD): Promise<number> {
  try {
    await c.publishAsync(TOPIC, payload, { qos: 1 });
    return 0;
  } catch (e) {
    const code = (e as { code?: number }).code;
    if (code === undefined) throw e;
    return code;
  }
}

/** Publishes (MQTT 5, QoS 1) until one is refused; returns how many were stored. */
async function fillUntilRefused(c: MqttClient, limit = 2000): Promise<number> {
  for (let i = 0; i < limit; i++) {
    const code = await publish1(c);
    if (code !== 0) {
      assert.equal(code, QUOTA_EXCEEDED, "a full store answers 0x97");
      return i;
    }
  }
  throw new Error(`the store took ${limit} messages without filling`);
}

function lines(gw: TestGateway, msg: string): string[] {
  return gw.logs.filter((l) => JSON.parse(l).msg === msg);
}

const FULL_ENV = {
  IGGY_MQTT_EMBEDDED_MAX_STORE_BYTES: String(1024 * 1024),
  // A store this small takes messages up to an eighth of it (embedded.max_store_bytes's check).
  IGGY_MQTT_LIMITS_MAX_PACKET_BYTES: String(128 * 1024),
  IGGY_MQTT_LOG_RETENTION_MAX_TOPIC_BYTES: String(200 * 1024),
  // Retention runs when the test says so, as if its timer had come round.
  IGGY_MQTT_LOG_RETENTION_INTERVAL_MS: "3600000",
};

Deno.test("full store: a small commit that still fits does not make /ready 200 while a message of the largest size has no room; retention freeing room does", async () => {
  const gw = await startGateway({ env: FULL_ENV });
  const c = await client(gw, 5);
  try {
    const stored = await fillUntilRefused(c);
    assert.ok(stored > 50 && stored < 200, `${stored} stored before the store filled`);
    const down = await ready(gw);
    assert.equal(down.status, 503);
    assert.match(down.body, /full: max_store_bytes reached \(\d+ of 1048576 bytes in segments/);
    // A small message still fits the last segment's tail: it is stored (a commit succeeds)…
    assert.equal(await publish1(c, "small"), 0);
    // …and the store is still full for what devices send.
    assert.equal((await ready(gw)).status, 503, "/ready after a small commit");
    assert.match((await ready(gw)).body, /room for \d+ bytes, one message needs \d+/);
    assert.deepEqual(await fullCauses(gw), ["max_store_bytes"]);
    assert.equal(await publish1(c), QUOTA_EXCEEDED);
    assert.equal((await ready(gw)).status, 503, "/ready after another refusal");

    const { deleted } = await (gw.view.log as EmbeddedBackend).runRetention();
    assert.ok(deleted > 0);
    assert.equal((await ready(gw)).status, 200, "/ready once retention freed room");
    assert.deepEqual(await fullCauses(gw), []);
    assert.equal(await publish1(c), 0);
    // Logged as a full store (a warn line per bound), not as an error per batch.
    assert.ok(
      lines(gw, "Appends refused: the message log is at embedded.max_store_bytes").length >= 1,
    );
    assert.equal(lines(gw, "Append failed; no PUBACK").length, 0);
  } finally {
    await c.endAsync(true);
    await gw.stop();
  }
});

Deno.test("full store: QoS 0 PUBLISHes refused by a full store are dropped and counted by reason, the connection stays (3.1.1 and 5), QoS 1 on it gets 0x97 (5)", async () => {
  const gw = await startGateway({ env: FULL_ENV });
  const filler = await client(gw, 5);
  const v4 = await client(gw, 4);
  const v5 = await client(gw, 5);
  try {
    await fillUntilRefused(filler);
    let closes = 0;
    for (const c of [v4, v5]) c.on("close", () => closes++);
    for (let i = 0; i < 20; i++) {
      v4.publish(TOPIC, PAYLOAD, { qos: 0 });
      v5.publish(TOPIC, PAYLOAD, { qos: 0 });
    }
    // Barrier: a PINGRESP comes after every one of those PUBLISHes was read and answered.
    await mqttjsPing(v4);
    await mqttjsPing(v5);
    const metrics = async () =>
      await (await fetch(`http://127.0.0.1:${gw.httpPort}/metrics`)).text();
    await waitFor(
      async () =>
        /mqtt_qos0_not_stored_total\{reason="max_store_bytes"\} 40\n/.test(await metrics()),
      5000,
      "40 QoS 0 messages counted as not stored, by reason",
    );
    assert.equal(closes, 0, "no connection closed for a full store");
    assert.ok(v4.connected && v5.connected);
    assert.equal(await publish1(v5), QUOTA_EXCEEDED, "QoS 1 on the same connection");
    assert.ok(v5.connected);
    const refused = lines(gw, "Appends refused: the message log is at embedded.max_store_bytes");
    assert.ok(refused.length >= 1 && refused.length <= 5, `${refused.length} lines, rate-limited`);
    assert.equal(JSON.parse(refused[0]).level, "warn");
  } finally {
    for (const c of [filler, v4, v5]) await c.endAsync(true);
    await gw.stop();
  }
});

Deno.test({
  name:
    `full store and full disk: /ready names both, and freeing the disk leaves it 503 for max_store_bytes until retention frees room; each cause logged and in /status.json${SMALL_DISK_NOTE}`,
  ignore: SMALL_DISK_SKIP !== "",
  async fn() {
    const name = `fullstore-${crypto.randomUUID()}`;
    await using disk = await mountSmallDisk(`${ROOT}data/${name}`, 32);
    // Not a whole number of segments: eight segments of 256 KiB leave 28 KiB under the bound,
    // less than one segment (what /ready asks for in a store this small) but room for a
    // segment the disk is then asked for.
    const gw = await startGateway({
      env: {
        ...FULL_ENV,
        IGGY_MQTT_EMBEDDED_MAX_STORE_BYTES: String(8 * 256 * 1024 + 28 * 1024),
        IGGY_MQTT_LIMITS_MAX_PACKET_BYTES: String(256 * 1024), // one segment, as /ready asks
        IGGY_MQTT_EMBEDDED_PATH: `${disk.dir}/gateway.db`,
      },
    });
    const c = await client(gw, 5);
    try {
      // Into the last whole segment the bound allows (the eighth exists once the seventh is a
      // quarter used: made ahead of need), well before it is full: room under the bound for
      // less than a whole segment.
      const segments = () =>
        [...Deno.readDirSync(`${disk.dir}/gateway.db-log`)].filter((e) =>
          segmentBase(e.name) !== undefined
        )
          .length;
      for (let i = 0; segments() < 8; i++) {
        assert.ok(i < 1000, "eight segments made");
        assert.equal(await publish1(c), 0);
      }
      for (let i = 0; i < 40; i++) assert.equal(await publish1(c), 0);
      assert.deepEqual(await readyCauses(gw), ["max_store_bytes"]);
      assert.equal((await ready(gw)).status, 503);
      // The disk fills too: the next segment, which the bound still allows, is refused by it.
      await disk.fill(DISK_RESERVE_BYTES / 2);
      await fillUntilRefused(c);
      await waitFor(async () => (await readyCauses(gw)).length === 2, 5000, "both causes");
      assert.deepEqual(await fullCauses(gw), ["max_store_bytes", "disk"]);
      const both = await ready(gw);
      assert.equal(both.status, 503);
      assert.match(both.body, /max_store_bytes reached/);
      assert.match(both.body, /The disk holding .* has \d+ bytes free/);
      assert.ok(lines(gw, "Appends refused: the disk holding the store is full").length >= 1);

      // Space freed on the disk: its cause goes, the bound's stays.
      await disk.unfill();
      await waitFor(async () => (await readyCauses(gw)).length < 2, 3000, "the disk's cause gone");
      assert.deepEqual(await readyCauses(gw), ["max_store_bytes"]);
      assert.deepEqual(await fullCauses(gw), ["max_store_bytes"]);
      const bound = await ready(gw);
      assert.equal(bound.status, 503, "/ready with the bound still reached");
      assert.doesNotMatch(bound.body, /The disk holding .* has \d+ bytes free, less/);
      // The room under the bound takes messages until it is used up.
      assert.equal(await publish1(c), 0);
      await fillUntilRefused(c);
      assert.equal((await ready(gw)).status, 503);
      assert.ok(
        lines(gw, "Appends refused: the message log is at embedded.max_store_bytes").length >= 1,
      );

      const { deleted } = await (gw.view.log as EmbeddedBackend).runRetention();
      assert.ok(deleted > 0);
      assert.equal((await ready(gw)).status, 200, "/ready once retention freed room");
      assert.equal(await publish1(c), 0);
    } finally {
      await c.endAsync(true);
      await gw.stop();
    }
  },
});

import assert from "node:assert/strict";
import { openTestStore, sizedMessage } from "../../tests/helpers/embedded_store.ts";
import { GatewayMetrics } from "../observe/gateway_metrics.ts";
import { Logger } from "../observe/logger.ts";
import { watchRetention } from "./retention_watch.ts";

const address = { stream: "sensors", topic: "temp", partition: 0 };

function watched(backend: Parameters<typeof watchRetention>[0]) {
  const lines: Record<string, unknown>[] = [];
  const metrics = new GatewayMetrics();
  watchRetention(backend, metrics, new Logger("info", (l) => lines.push(JSON.parse(l))));
  return { lines, metrics };
}

Deno.test("watchRetention(): a size-bound pass that deletes messages a stored session had not read logs one warn line with stream, topic, messages, bytes and who had not read them, and counts them", async () => {
  await using store = await openTestStore({ retentionMaxTopicBytes: 64 * 1024 });
  const { backend } = store;
  const { lines, metrics } = watched(backend);
  await backend.createTopic(address.stream, address.topic, { partitions: 1 });
  for (let i = 0; i < 200; i++) {
    await backend.append({ ...address, messages: [sizedMessage(1024)] });
  }
  await backend.storeOffset("mqtt-session-dev-1", address, 9); // read 10 of them
  await backend.storeOffset("mqtt-share/g/sensors/#", address, 199); // read them all
  const { deleted } = await backend.runRetention();
  assert.ok(deleted > 100, `the 64 KiB bound deletes most of 200 KiB: ${deleted}`);
  assert.equal(lines.length, 1, JSON.stringify(lines));
  const line = lines[0];
  assert.equal(line.level, "warn");
  assert.equal(line.messages, deleted);
  const [topic] = line.topics as Record<string, unknown>[];
  assert.equal(topic.stream, "sensors");
  assert.equal(topic.topic, "temp");
  assert.equal(topic.messages, deleted);
  assert.ok((topic.bytes as number) >= deleted * 1024, `bytes: ${topic.bytes}`);
  assert.equal(topic.unread_sessions, 1);
  assert.equal(topic.unread_share_groups, 0, "the share group had read them all");
  assert.equal(metrics.retentionDeletedMessages.get({ unread: "yes" }), deleted);
  assert.equal(metrics.retentionDeletedBytes.get({ unread: "yes" }), topic.bytes);

  // A pass that deletes nothing says nothing.
  assert.deepEqual(await backend.runRetention(), { deleted: 0 });
  assert.equal(lines.length, 1);
});

Deno.test("watchRetention(): an age pass that deletes what every reader had read logs one info line", async () => {
  const clock = { now: 1_700_000_000_000_000 };
  await using store = await openTestStore({ retentionMaxAgeSeconds: 60, clock: () => clock.now });
  const { backend } = store;
  const { lines, metrics } = watched(backend);
  await backend.createTopic(address.stream, address.topic, { partitions: 2 });
  const p1 = { ...address, partition: 1 };
  await backend.append({ ...address, messages: [sizedMessage(2048), sizedMessage(2048)] });
  await backend.append({ ...p1, messages: [sizedMessage(2048)] });
  await backend.storeOffset("mqtt-session-dev-2", address, 1);
  clock.now += 3_600_000_000;
  assert.deepEqual(await backend.runRetention(), { deleted: 3 });
  assert.equal(lines.length, 1, "one line per pass, both partitions in it");
  assert.equal(lines[0].level, "info");
  assert.equal(lines[0].messages, 3);
  const [topic] = lines[0].topics as Record<string, unknown>[];
  assert.deepEqual([topic.messages, topic.unread_sessions], [3, 0]);
  assert.equal(metrics.retentionDeletedMessages.get({ unread: "no" }), 3);
});

import assert from "node:assert/strict";
import { openTestStore, textMessage } from "../../tests/helpers/embedded_store.ts";
import { newestStored } from "./newest_stored.ts";

const T0_MICROS = 1_780_000_000_000_000;

Deno.test("newestStored: the newest of the partitions' last messages; empty partitions and an empty store give none", async () => {
  let now = T0_MICROS;
  await using store = await openTestStore({ clock: () => now });
  const log = store.backend;
  assert.deepEqual(await newestStored(log), { newestMs: null, partitions: 0, unread: 0 });
  await log.createTopic("s", "a", { partitions: 3 });
  await log.createTopic("s", "b", { partitions: 1 });
  const append = (topic: string, partition: number) =>
    log.append({ stream: "s", topic, partition, messages: [textMessage("x".repeat(1024))] });
  await append("a", 0);
  now += 20 * 86_400_000_000; // written 20 days ahead, then the clock stepped back
  await append("a", 1);
  now = T0_MICROS + 5_000_000;
  await append("a", 1);
  await append("b", 0);
  // a/1's last message is older than its first: the last one is the clock's latest reading.
  assert.deepEqual(await newestStored(log), {
    newestMs: (T0_MICROS + 5_000_000) / 1000,
    partitions: 4,
    unread: 0,
  });
});

Deno.test("newestStored: past the bound, the partitions beyond are counted unread, not read", async () => {
  let now = T0_MICROS;
  await using store = await openTestStore({ clock: () => now });
  const log = store.backend;
  await log.createTopic("s", "a", { partitions: 4 });
  for (let partition = 0; partition < 4; partition++) {
    now = T0_MICROS + partition * 60_000_000;
    await log.append({ stream: "s", topic: "a", partition, messages: [textMessage("m")] });
  }
  assert.deepEqual(await newestStored(log, 2), {
    newestMs: (T0_MICROS + 60_000_000) / 1000,
    partitions: 2,
    unread: 2,
  });
});

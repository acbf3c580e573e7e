/**
 * The local disk bound in forward mode: retention never drops what is not forwarded; at the
 * bound `refuse` stops acknowledging and resumes once the uplink drained the backlog (nothing
 * acknowledged lost), `drop_oldest` keeps accepting and the forwarder reports the gap.
 */
import assert from "node:assert/strict";
import { Forwarder } from "../../src/forward/forwarder.ts";
import { testForwarderOptions } from "../helpers/forward.ts";
import { FORWARD_CONSUMER } from "../../src/forward/lane.ts";
import { BackendError, type LogBackend } from "../../src/log/port.ts";
import { Logger } from "../../src/observe/logger.ts";
import { openTestStore, sizedMessage } from "../helpers/embedded_store.ts";
import { FaultyUpstream } from "../helpers/faulty_upstream.ts";
import { waitFor } from "../helpers/wait.ts";

const OPTIONS = testForwarderOptions({ gatewayId: "edge-1" });
const A = { stream: "s", topic: "t", partition: 0 };
const BOUND = 256 * 1024;

/** Appends 1 KiB messages until one is refused full; how many were acknowledged. */
async function fillUp(local: LogBackend): Promise<number> {
  for (let i = 0; i < 10_000; i++) {
    try {
      await local.append({ ...A, messages: [sizedMessage(1024)] });
    } catch (e) {
      assert.ok(e instanceof BackendError && e.code === "full", String(e));
      return i;
    }
  }
  throw new Error("the store never filled up");
}

async function appended(local: LogBackend): Promise<boolean> {
  try {
    await local.append({ ...A, messages: [sizedMessage(1024)] });
    return true;
  } catch {
    return false;
  }
}

Deno.test("retention by age and size keeps every message that is not forwarded", async () => {
  await using local = await openTestStore({
    retentionMaxAgeSeconds: 1,
    retentionMaxTopicBytes: 4 * 1024,
    forward: { consumer: FORWARD_CONSUMER, whenFull: "refuse" },
  });
  await local.backend.createTopic("s", "t", { partitions: 1 });
  for (let i = 0; i < 20; i++) await local.backend.append({ ...A, messages: [sizedMessage(1024)] });
  const hourLater = Date.now() * 1000 + 3_600e6;
  assert.deepEqual(await local.backend.runRetention(hourLater), { deleted: 0 });
  await local.backend.storeOffset(FORWARD_CONSUMER, A, 9); // 0..9 forwarded
  assert.deepEqual(await local.backend.runRetention(hourLater), { deleted: 10 });
  assert.equal((await local.backend.poll(A, 0, 100))[0].offset, 10);
});

Deno.test("refuse: at the bound appends fail; once forwarded they resume, nothing lost", async () => {
  await using local = await openTestStore({
    maxStoreBytes: BOUND,
    forward: { consumer: FORWARD_CONSUMER, whenFull: "refuse" },
  });
  await using upstream = await openTestStore();
  const faulty = new FaultyUpstream(upstream.backend);
  faulty.faults.down = true;
  await local.backend.createTopic("s", "t", { partitions: 1 });
  const fitted = await fillUp(local.backend);
  assert.ok(fitted > 100, `${fitted} fitted`);
  assert.equal(await appended(local.backend), false, "still full: nothing forwarded yet");
  const fw = new Forwarder(local.backend, () => faulty.open(), OPTIONS, new Logger("error"));
  await fw.start();
  assert.equal(await appended(local.backend), false, "the uplink is down: still refused");
  faulty.faults.down = false;
  await waitFor(() => appended(local.backend), 10_000, "appends accepted again");
  await waitFor(async () => await upstream.backend.nextOffset(A).catch(() => 0) > fitted, 10_000);
  const up = await upstream.backend.poll(A, 0, 100_000);
  assert.deepEqual(
    up.slice(0, fitted).map((m) => m.offset),
    Array.from({ length: fitted }, (_, i) => i),
    "every acknowledged message is upstream, in order",
  );
  assert.equal(fw.counters.dropped, 0);
  await fw.stop();
});

Deno.test("drop_oldest: appends go on past the bound; the forwarder reports the gap", async () => {
  await using local = await openTestStore({
    maxStoreBytes: BOUND,
    forward: { consumer: FORWARD_CONSUMER, whenFull: "drop_oldest" },
  });
  await using upstream = await openTestStore();
  const faulty = new FaultyUpstream(upstream.backend);
  faulty.faults.down = true;
  await local.backend.createTopic("s", "t", { partitions: 1 });
  let accepted = 0;
  for (let i = 0; accepted < 1000 && i < 5000; i++) if (await appended(local.backend)) accepted++;
  assert.equal(accepted, 1000, "the bound never stops appends for long");
  const logs: string[] = [];
  const fw = new Forwarder(
    local.backend,
    () => faulty.open(),
    OPTIONS,
    new Logger("warn", (l) => logs.push(l)),
  );
  await fw.start();
  faulty.faults.down = false;
  await waitFor(() => fw.status().lagMessages === 0 && fw.counters.sent > 0, 10_000, "drained");
  assert.ok(fw.counters.dropped > 0, "some unforwarded messages went");
  assert.equal(fw.counters.dropped + fw.counters.sent, 1000, "each either forwarded or counted");
  assert.ok(logs.some((l) => l.includes("Forward gap")), "the gap is logged");
  const up = await upstream.backend.poll(A, 0, 100_000);
  assert.equal(up.length, fw.counters.sent);
  await fw.stop();
});

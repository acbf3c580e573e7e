/**
 * The forwarder between two real logs (embedded, the upstream behind a fault switch): every
 * appended message arrives upstream once, in per-partition order, across an uplink that is
 * down at start, sends cut before and after the upstream stored them, and a restart.
 */
import assert from "node:assert/strict";
import { Forwarder } from "../../src/forward/forwarder.ts";
import { testForwarderOptions } from "../helpers/forward.ts";
import { GATEWAY_HEADER, ORIGIN_HEADER } from "../../src/forward/origin.ts";
import { FORWARD_CONSUMER } from "../../src/forward/lane.ts";
import type { LogBackend } from "../../src/log/port.ts";
import { Logger } from "../../src/observe/logger.ts";
import { openTestStore, textMessage } from "../helpers/embedded_store.ts";
import { FaultyUpstream } from "../helpers/faulty_upstream.ts";
import { waitFor } from "../helpers/wait.ts";

const OPTIONS = testForwarderOptions();
const quiet = () => new Logger("error", () => {});

async function appendMany(local: LogBackend, partitions: number, perPartition: number) {
  await local.createTopic("plant", "readings", { partitions });
  for (let p = 0; p < partitions; p++) {
    for (let i = 0; i < perPartition; i += 50) {
      const messages = [];
      for (let j = i; j < Math.min(perPartition, i + 50); j++) {
        messages.push(textMessage(`p${p}-${j}`, { "mqtt.topic": `plant/${p}` }));
      }
      await local.append({ stream: "plant", topic: "readings", partition: p, messages });
    }
  }
}

/** Every upstream partition's payloads in offset order. */
async function upstreamPayloads(up: LogBackend, partitions: number): Promise<string[][]> {
  const out: string[][] = [];
  for (let p = 0; p < partitions; p++) {
    const a = { stream: "plant", topic: "readings", partition: p };
    const msgs = await up.poll(a, 0, 1_000_000);
    out.push(msgs.map((m) => new TextDecoder().decode(m.payload)));
  }
  return out;
}

function expected(partitions: number, perPartition: number): string[][] {
  return Array.from(
    { length: partitions },
    (_, p) => Array.from({ length: perPartition }, (_, j) => `p${p}-${j}`),
  );
}

async function total(up: LogBackend, partitions: number): Promise<number> {
  let n = 0;
  for (let p = 0; p < partitions; p++) {
    n += await up.nextOffset({ stream: "plant", topic: "readings", partition: p }).catch(() => 0);
  }
  return n;
}

Deno.test("the forwarder copies every message once, in order, with its origin headers", async () => {
  await using local = await openTestStore();
  await using upstream = await openTestStore();
  await appendMany(local.backend, 3, 500);
  const faulty = new FaultyUpstream(upstream.backend);
  const fw = new Forwarder(local.backend, () => faulty.open(), OPTIONS, quiet());
  await fw.start();
  await waitFor(async () => await total(upstream.backend, 3) >= 1500, 10_000, "1500 upstream");
  await waitFor(() => fw.status().lagMessages === 0, 5_000, "no lag");
  assert.deepEqual(await upstreamPayloads(upstream.backend, 3), expected(3, 500));
  const first = (await upstream.backend.poll(
    { stream: "plant", topic: "readings", partition: 2 },
    7,
    1,
  ))[0];
  assert.deepEqual(first.headers.get(GATEWAY_HEADER), "edge-7");
  assert.deepEqual(first.headers.get(ORIGIN_HEADER), "2/7");
  assert.deepEqual(first.headers.get("mqtt.topic"), "plant/2");
  assert.deepEqual(fw.counters.sent, 1500);
  assert.deepEqual(fw.status().up, true);
  await fw.stop();
});

Deno.test("an uplink down at start: the forwarder waits, then forwards everything", async () => {
  await using local = await openTestStore();
  await using upstream = await openTestStore();
  const faulty = new FaultyUpstream(upstream.backend);
  faulty.faults.down = true;
  await appendMany(local.backend, 2, 300);
  const fw = new Forwarder(local.backend, () => faulty.open(), OPTIONS, quiet());
  await fw.start();
  await waitFor(() => fw.status().lagMessages === 600 || fw.counters.failures > 0, 5_000, "lag");
  assert.deepEqual(fw.status().up, false);
  assert.deepEqual(await total(upstream.backend, 2), 0);
  faulty.faults.down = false;
  await waitFor(async () => await total(upstream.backend, 2) >= 600, 10_000, "600 upstream");
  assert.deepEqual(await upstreamPayloads(upstream.backend, 2), expected(2, 300));
  await fw.stop();
});

Deno.test("sends cut before and after the upstream stored them: 0 lost, 0 duplicates", async () => {
  await using local = await openTestStore();
  await using upstream = await openTestStore();
  const faulty = new FaultyUpstream(upstream.backend);
  faulty.faults.cutAfterStoreEvery = 3;
  faulty.faults.cutBeforeStoreEvery = 5;
  await appendMany(local.backend, 3, 1000);
  const fw = new Forwarder(local.backend, () => faulty.open(), OPTIONS, quiet());
  await fw.start();
  await waitFor(
    async () => {
      const s = fw.status();
      return s.lagMessages === 0 && await total(upstream.backend, 3) >= 3000;
    },
    20_000,
    "all forwarded",
  );
  assert.ok(faulty.cutAfter > 0 && faulty.cutBefore > 0, "both kinds of cut happened");
  assert.deepEqual(await upstreamPayloads(upstream.backend, 3), expected(3, 1000));
  assert.ok(fw.counters.foundUpstream > 0, "a resolve found a cut send upstream");
  await fw.stop();
});

Deno.test("a restart between the upstream's store and the local position: no duplicate", async () => {
  await using local = await openTestStore();
  await using upstream = await openTestStore();
  await appendMany(local.backend, 1, 400);
  const faulty = new FaultyUpstream(upstream.backend);
  const first = new Forwarder(local.backend, () => faulty.open(), OPTIONS, quiet());
  await first.start();
  await waitFor(async () => await total(upstream.backend, 1) >= 400, 10_000, "400 upstream");
  await first.stop();
  // The crash: the local position goes back as if the last confirmations were never stored.
  const a = { stream: "plant", topic: "readings", partition: 0 };
  await local.backend.storeOffset(FORWARD_CONSUMER, a, 99);
  await appendMany(local.backend, 1, 100); // 100 more (payloads p0-0..99 again, offsets 400+)
  const second = new Forwarder(local.backend, () => faulty.open(), OPTIONS, quiet());
  await second.start();
  await waitFor(async () => await total(upstream.backend, 1) >= 500, 10_000, "500 upstream");
  await waitFor(() => second.status().lagMessages === 0, 5_000, "caught up");
  const upstreamOrigins = (await upstream.backend.poll(a, 0, 10_000)).map((m) =>
    m.headers.get(ORIGIN_HEADER)
  );
  assert.deepEqual(upstreamOrigins, Array.from({ length: 500 }, (_, i) => `0/${i}`));
  assert.deepEqual(second.counters.foundUpstream, 300);
  await second.stop();
});

Deno.test("a stream slower than a full send goes in a send per linger, not per round trip", async () => {
  await using local = await openTestStore();
  await using upstream = await openTestStore();
  await local.backend.createTopic("plant", "readings", { partitions: 1 });
  const faulty = new FaultyUpstream(upstream.backend);
  faulty.faults.sendMs = 20; // a WAN round trip
  const options = testForwarderOptions({ batchMaxMessages: 1000, lingerMs: 250 });
  const fw = new Forwarder(local.backend, () => faulty.open(), options, quiet());
  await fw.start();
  const at = { stream: "plant", topic: "readings", partition: 0 };
  const one = (i: number) => textMessage(`m${i}`, { "mqtt.topic": "plant/0" });
  // 1 s of a message every 5 ms: sent as it came, that is a send per round trip (about 50).
  for (let i = 0; i < 200; i++) {
    await local.backend.append({ ...at, messages: [one(i)] });
    await new Promise((r) => setTimeout(r, 5));
  }
  await waitFor(() => fw.counters.sent === 200, 5_000, "200 sent");
  assert.ok(faulty.appends <= 12, `${faulty.appends} sends for 200 messages`);
  assert.deepEqual(
    (await upstreamPayloads(upstream.backend, 1))[0],
    Array.from({ length: 200 }, (_, i) => `m${i}`),
  );
  await fw.stop();
});

Deno.test("a backlog goes in full sends back to back, without a linger between them", async () => {
  await using local = await openTestStore();
  await using upstream = await openTestStore();
  const faulty = new FaultyUpstream(upstream.backend);
  faulty.faults.down = true;
  await appendMany(local.backend, 1, 1000);
  // A linger of 2 s: ten sends with a linger between them would take 18 s or more.
  const options = testForwarderOptions({ batchMaxMessages: 100, lingerMs: 2_000 });
  const fw = new Forwarder(local.backend, () => faulty.open(), options, quiet());
  await fw.start();
  await waitFor(() => fw.counters.failures > 0 || fw.status().lagMessages === 1000, 5_000, "lag");
  faulty.faults.down = false;
  await waitFor(() => fw.counters.sent === 1000, 8_000, "1000 sent within 8 s");
  assert.equal(faulty.appends, 10);
  assert.deepEqual(await upstreamPayloads(upstream.backend, 1), expected(1, 1000));
  await fw.stop();
});

Deno.test("a resolve ignores an upstream origin beyond the local end (corrupted or forged): nothing is skipped", async () => {
  // A hostile or broken upstream: a message naming this gateway and partition but local offset
  // 5000, which the partition never reached. Taken as landed, it moved the forwarded position
  // to 5001 and the 100 messages appended after it were never forwarded.
  await using local = await openTestStore();
  await using upstream = await openTestStore();
  await appendMany(local.backend, 1, 100);
  const faulty = new FaultyUpstream(upstream.backend);
  const first = new Forwarder(local.backend, () => faulty.open(), OPTIONS, quiet());
  await first.start();
  await waitFor(async () => await total(upstream.backend, 1) >= 100, 10_000, "100 upstream");
  await first.stop();
  const a = { stream: "plant", topic: "readings", partition: 0 };
  const forged = textMessage("forged", { [GATEWAY_HEADER]: "edge-7", [ORIGIN_HEADER]: "0/5000" });
  await upstream.backend.append({ ...a, messages: [forged] });
  await local.backend.append({
    ...a,
    messages: Array.from({ length: 100 }, (_, j) => textMessage(`p0-${100 + j}`, {})),
  });
  const logs: string[] = [];
  const second = new Forwarder(
    local.backend,
    () => faulty.open(),
    OPTIONS,
    new Logger("warn", (l) => logs.push(l)),
  );
  await second.start();
  await waitFor(async () => await total(upstream.backend, 1) >= 201, 10_000, "201 upstream");
  await waitFor(() => second.status().lagMessages === 0, 5_000, "caught up");
  const [payloads] = await upstreamPayloads(upstream.backend, 1);
  const want = expected(1, 200)[0];
  assert.deepEqual(payloads, [...want.slice(0, 100), "forged", ...want.slice(100)]);
  assert.equal(second.counters.strayOrigins, 1);
  assert.ok(logs.some((l) => l.includes("claim local offsets never written")), logs.join("\n"));
  await second.stop();
});

/**
 * The uplink as an operator sees it, between two real logs (the upstream behind a fault
 * switch): an uplink lost mid-run under a steady load of KB messages is one `Uplink down` and
 * one `Uplink up` in the log, however many partitions retry; the status fields follow the
 * backlog; the lag in bytes is the bytes of the records still to send, counted the way a read
 * of them counts them, also after a restart.
 */
import assert from "node:assert/strict";
import { Forwarder } from "../../src/forward/forwarder.ts";
import type { ForwardSource } from "../../src/forward/lane.ts";
import type { LogBackend, OutgoingMessage } from "../../src/log/port.ts";
import { Logger } from "../../src/observe/logger.ts";
import { openTestStore } from "../helpers/embedded_store.ts";
import { FaultyUpstream } from "../helpers/faulty_upstream.ts";
import { testForwarderOptions } from "../helpers/forward.ts";
import { waitFor } from "../helpers/wait.ts";

const OPTIONS = testForwarderOptions();
const PARTITIONS = 3;
const at = (partition: number) => ({ stream: "plant", topic: "readings", partition });

/** A logger at info (what an operator's journal holds) that keeps its lines. */
function capture() {
  const lines: { msg: string; [k: string]: unknown }[] = [];
  const logger = new Logger("info", (l) => lines.push(JSON.parse(l)));
  return { logger, lines, named: (msg: string) => lines.filter((l) => l.msg === msg) };
}

/** A 1–4 KB message; its size varies so that no mean can stand in for the real bytes. */
function reading(n: number): OutgoingMessage {
  const size = 1024 + (n * 977) % 3072;
  return { payload: new Uint8Array(size).fill(0x61 + n % 26), headers: new Map([["n", `${n}`]]) };
}

/** Appends a few messages at a time, round the partitions, until `stop()`; resolves with the count. */
function steadyLoad(local: LogBackend) {
  const state = { on: true, paused: false, sent: 0, idle: () => {} };
  const done = (async () => {
    while (state.on) {
      if (state.paused) state.idle();
      else {
        const p = state.sent % PARTITIONS;
        const messages = [0, 1, 2, 3].map((i) => reading(state.sent + i));
        await local.append({ ...at(p), messages });
        state.sent += messages.length;
      }
      await new Promise((r) => setTimeout(r, 2)); // real time: a steady trickle, not a flood
    }
    return state.sent;
  })();
  /** Resolves once no append is under way any more. */
  const pause = () => new Promise<void>((r) => (state.idle = r, state.paused = true));
  return { state, pause, stop: () => (state.on = false, done) };
}

/** What waits to be sent: local messages past the upstream's end, and their stored bytes. */
async function realBacklog(local: ForwardSource, upstream: LogBackend) {
  let messages = 0;
  let bytes = 0;
  for (let p = 0; p < PARTITIONS; p++) {
    const end = await local.nextOffset(at(p));
    let from = await upstream.nextOffset(at(p)).catch(() => 0);
    while (from < end) {
      const run = (await local.pollEncoded(at(p), from, 1_000, 1 << 30))!;
      // Each message's headers and payload, as the spans of the read tell them.
      for (let i = 0; i < run.count; i++) bytes += run.spans[4 * i + 3] - run.spans[4 * i + 1];
      messages += run.count;
      from = run.firstOffset + run.count;
    }
  }
  return { messages, bytes };
}

Deno.test("an uplink lost mid-run under load: one 'Uplink down', one 'Uplink up', fields and lag bytes follow the backlog", async () => {
  await using local = await openTestStore();
  await using upstream = await openTestStore();
  await local.backend.createTopic("plant", "readings", { partitions: PARTITIONS });
  const faulty = new FaultyUpstream(upstream.backend);
  const { logger, lines, named } = capture();
  const fw = new Forwarder(local.backend, () => faulty.open(), OPTIONS, logger);
  await fw.start();
  const load = steadyLoad(local.backend);
  try {
    await waitFor(() => fw.counters.sent >= 300, 10_000, "300 forwarded");
    faulty.faults.down = true;
    await waitFor(() => !fw.uplinkState.up, 5_000, "the uplink seen down");
    const atDown = fw.uplinkState.fields();
    await waitFor(
      () => fw.uplinkState.fields().waiting_messages >= atDown.waiting_messages + 200,
      10_000,
      "the backlog growing while down",
    );
    // A still moment: the figures must be the real backlog's, to the byte.
    await load.pause();
    const real = await realBacklog(local.backend, upstream.backend);
    await waitFor(
      () => fw.status().lagMessages === real.messages,
      5_000,
      `the lag to reach ${real.messages}`,
    );
    const f = fw.uplinkState.fields();
    assert.equal(f.up, false);
    assert.match(f.reason, /uplink down \(test\)|down/);
    assert.equal(f.waiting_messages, real.messages);
    assert.equal(f.waiting_bytes, real.bytes);
    assert.equal(fw.status().lagBytes, real.bytes);
    assert.ok(f.oldest_age_s > 0, "the oldest waiting message has an age");
    assert.ok(real.bytes > real.messages * 1024, "KB payloads");
    load.state.paused = false;
    faulty.faults.down = false;
    await waitFor(() => named("Uplink up").length > 0, 15_000, "'Uplink up'");
    assert.equal(fw.uplinkState.fields().up, true);
  } finally {
    await load.stop();
  }
  const sent = async () => (await realBacklog(local.backend, upstream.backend)).messages === 0;
  await waitFor(async () => await sent() && fw.status().lagMessages === 0, 10_000, "drained");
  assert.equal(fw.status().lagBytes, 0);
  await fw.stop();
  assert.equal(named("Uplink down").length, 1, JSON.stringify(lines));
  assert.equal(named("Uplink up").length, 1, JSON.stringify(lines));
  const up = named("Uplink up")[0];
  assert.ok((up.down_ms as number) > 0 && (up.waited_messages as number) > 0);
  assert.ok((up.waited_bytes as number) > (up.waited_messages as number) * 1024);
  assert.equal(typeof up.drain_ms, "number");
  const retries = lines.filter((l) => /^Forward (failed|sends failing)/.test(l.msg));
  assert.deepEqual(retries, [], "no per-partition retry lines at info");
});

Deno.test("after a restart with the uplink down, the lag in bytes is the unsent records' bytes", async () => {
  await using local = await openTestStore();
  await using upstream = await openTestStore();
  await local.backend.createTopic("plant", "readings", { partitions: PARTITIONS });
  const faulty = new FaultyUpstream(upstream.backend);
  const append = async (from: number, count: number) => {
    for (let n = from; n < from + count; n++) {
      await local.backend.append({ ...at(n % PARTITIONS), messages: [reading(n)] });
    }
  };
  await append(0, 150);
  const quiet = new Logger("error", () => {});
  const first = new Forwarder(local.backend, () => faulty.open(), OPTIONS, quiet);
  await first.start();
  await waitFor(() => first.counters.sent === 150, 10_000, "150 forwarded");
  await first.stop();
  await append(150, 90);
  faulty.faults.down = true;
  const { logger, named } = capture();
  const again = new Forwarder(local.backend, () => faulty.open(), OPTIONS, logger);
  await again.start();
  const real = await realBacklog(local.backend, upstream.backend);
  assert.equal(real.messages, 90);
  await waitFor(() => again.status().lagMessages === 90, 5_000, "a lag of 90");
  await waitFor(() => again.status().lagBytes === real.bytes, 5_000, `${real.bytes} bytes`);
  assert.equal(named("Uplink down").length, 1);
  assert.equal(named("Uplink down")[0].waiting_messages as number <= 90, true);
  faulty.faults.down = false;
  await waitFor(() => named("Uplink up").length === 1, 10_000, "'Uplink up'");
  await waitFor(() => again.status().lagMessages === 0, 5_000, "drained");
  assert.equal(named("Uplink up")[0].waited_bytes, real.bytes);
  await again.stop();
});

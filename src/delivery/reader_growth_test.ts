/**
 * An idle shared reader of the log on this machine waits for the log to say its partition grew
 * (`LocalLog.watchGrowth`, through the reader pool) and sets no timer; a reader of Iggy looks
 * again on a backoff timer. A growth said while a poll was in flight is not lost.
 *
 * The barrier for "the reader went idle": its poll resolved empty, then one macrotask, which
 * runs after every microtask the reader's loop queued on the way to its sleep (a timer it sets
 * is set by then).
 */
import assert from "node:assert/strict";
import type { LogBackend, PartitionAddress, StoredMessage } from "../log/port.ts";
import type { GrowthObserver } from "../log/local_log.ts";
import { GatewayMetrics } from "../observe/gateway_metrics.ts";
import { Logger } from "../observe/logger.ts";
import { ReaderPool } from "./reader_pool.ts";
import { tripleKey } from "./registry.ts";

const TRIPLE = { stream: "s", topic: "t", partition: 0 };

/** A partition in memory whose polls the test releases one by one. */
class HeldLog {
  readonly messages: StoredMessage[] = [];
  /** Polls asked and not yet answered. */
  readonly pending: { from: number; answer: () => void }[] = [];
  observer: GrowthObserver | null = null;
  polls = 0;
  #asked: (() => void) | null = null;

  readonly backend: Pick<LogBackend, "poll" | "storeOffset" | "nextOffset"> = {
    poll: (_a, from) =>
      new Promise<StoredMessage[]>((resolve) => {
        this.polls++;
        this.pending.push({
          from,
          answer: () => resolve(this.messages.filter((m) => m.offset >= from)),
        });
        this.#asked?.();
      }),
    storeOffset: () => Promise.resolve(),
    nextOffset: () => Promise.resolve(this.messages.length),
  };

  readonly growth = {
    watchGrowth: (observe: GrowthObserver) => {
      this.observer = observe;
      return () => void (this.observer = null);
    },
  };

  /** Resolves once a poll is pending. */
  asked(): Promise<void> {
    if (this.pending.length > 0) return Promise.resolve();
    return new Promise((r) => this.#asked = () => (this.#asked = null, r()));
  }

  /** Answers the oldest pending poll with what the partition holds now. */
  answer(): void {
    this.pending.shift()!.answer();
  }

  append(address: PartitionAddress): void {
    const offset = this.messages.length;
    this.messages.push({
      partition: address.partition,
      offset,
      timestampMicros: 0,
      payload: new Uint8Array([offset]),
      headers: new Map(),
    });
  }
}

/** Runs `fn` counting the timers set meanwhile that are no longer than `maxMs`. */
async function countingShortTimers(maxMs: number, fn: () => Promise<void>): Promise<number> {
  const original = globalThis.setTimeout;
  let count = 0;
  globalThis.setTimeout = ((cb: () => void, ms?: number) => {
    if ((ms ?? 0) > 0 && (ms ?? 0) <= maxMs) count++;
    return original(cb, ms);
  }) as typeof setTimeout;
  try {
    await fn();
  } finally {
    globalThis.setTimeout = original;
  }
  return count;
}

/** One macrotask: every microtask queued before it has run. */
const turn = () => new Promise<void>((r) => setTimeout(r, 0));

function poolOn(
  log: HeldLog,
  local: boolean,
  routed: StoredMessage[],
  commitIntervalMs = 60_000,
): ReaderPool {
  return new ReaderPool({
    backend: log.backend,
    options: {
      consumer: "c",
      pollBatch: 10,
      commitIntervalMs,
      commitBatchCount: 1000,
      maxUnsettled: 100,
    },
    route: (reader, batch) => {
      routed.push(...batch);
      for (const m of batch) {
        const entry = reader.ledger.record(m.offset, 1);
        if (entry !== null) reader.ledger.settle(entry);
      }
    },
    metrics: new GatewayMetrics(),
    logger: new Logger("error", () => {}),
    growth: local ? log.growth : null,
  });
}

async function stopAll(pool: ReaderPool, log: HeldLog): Promise<void> {
  for (const r of pool.readers.values()) r.stop(true);
  while (log.pending.length > 0) log.answer();
  await Promise.all([...pool.readers.values()].map((r) => r.done));
  pool.close();
}

for (const local of [true, false]) {
  Deno.test(
    `an idle shared reader of ${
      local ? "the local log waits for its growth, no timer" : "Iggy looks again on a timer"
    }`,
    async () => {
      const log = new HeldLog();
      const routed: StoredMessage[] = [];
      const pool = poolOn(log, local, routed);
      const timers = await countingShortTimers(50, async () => {
        pool.reserveNow(TRIPLE, 0);
        await log.asked();
        log.answer(); // empty: the reader goes idle
        await turn();
      });
      try {
        assert.equal(timers, local ? 0 : 1, "a backoff timer only for Iggy");
        assert.equal(log.polls, 1);
        log.append(TRIPLE);
        if (local) log.observer!(TRIPLE, 1);
        // The local log: the growth ends the sleep; Iggy: the backoff timer does.
        await log.asked();
        log.answer();
        await turn();
        assert.deepEqual(routed.map((m) => m.offset), [0]);
      } finally {
        await stopAll(pool, log);
      }
    },
  );
}

Deno.test("a growth the local log said while the reader's poll was in flight is polled for, not waited for", async () => {
  const log = new HeldLog();
  const routed: StoredMessage[] = [];
  const pool = poolOn(log, true, routed);
  try {
    pool.reserveNow(TRIPLE, 0);
    await log.asked();
    log.observer!(TRIPLE, 1); // said while the poll is pending: its wake finds no sleeper
    log.answer(); // the poll read before the append
    log.append(TRIPLE);
    await log.asked(); // polled again after a backoff, with no further growth said
    log.answer();
    await turn();
    assert.deepEqual(routed.map((m) => m.offset), [0]);
  } finally {
    await stopAll(pool, log);
  }
});

Deno.test("a growth up to where the reader already is (an offer routed it) does not wake it", async () => {
  const log = new HeldLog();
  const routed: StoredMessage[] = [];
  const pool = poolOn(log, true, routed);
  try {
    pool.reserveNow(TRIPLE, 0);
    await log.asked();
    log.answer();
    await turn();
    const reader = pool.readers.get(tripleKey(TRIPLE))!;
    reader.offerAppended(0, [{ payload: new Uint8Array([0]), headers: new Map() }]);
    log.append(TRIPLE);
    log.observer!(TRIPLE, 1);
    await turn();
    assert.equal(log.polls, 1, "no poll: the offer already routed offset 0");
    assert.deepEqual(routed.map((m) => m.offset), [0]);
  } finally {
    await stopAll(pool, log);
  }
});

Deno.test("one timer stores every reader's offset: the stores of a tick are made in one run, together", async () => {
  const log = new HeldLog();
  // Each run of JavaScript's stores, as the partitions stored (what one catalog transaction gets).
  const runs: number[][] = [];
  let run: number[] = [];
  let storedCount = 0;
  log.backend.storeOffset = (_consumer, address) => {
    if (run.length === 0) queueMicrotask(() => (runs.push(run), run = []));
    run.push(address.partition);
    storedCount++;
    return Promise.resolve();
  };
  const pool = poolOn(log, true, [], 30);
  const triples = [0, 1, 2].map((partition) => ({ ...TRIPLE, partition }));
  try {
    for (const triple of triples) {
      pool.reserveNow(triple, 0);
      await log.asked();
      log.answer(); // empty: idle
      await new Promise((r) => setTimeout(r, 7)); // readers started at different times
    }
    // All three settle in one run: the next tick stores the three offsets.
    for (const triple of triples) {
      pool.readers.get(tripleKey(triple))!.offerAppended(0, [
        { payload: new Uint8Array([0]), headers: new Map() },
      ]);
    }
    while (storedCount < 3) await new Promise((r) => setTimeout(r, 5)); // the commit timer is unref'd
    await turn();
    assert.deepEqual(runs, [[0, 1, 2]]);
  } finally {
    await stopAll(pool, log);
  }
});

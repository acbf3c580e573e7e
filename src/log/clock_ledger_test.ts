import assert from "node:assert/strict";
import { WallClock } from "../base/wall_clock.ts";
import { Logger } from "../observe/logger.ts";
import { ClockLedger, clockLedgerPath, parseLedger } from "./clock_ledger.ts";

const DAY_MS = 86_400_000;
const T0 = 1_780_000_000_000;

function logger() {
  const lines: Record<string, unknown>[] = [];
  return { lines, logger: new Logger("info", (l) => lines.push(JSON.parse(l))) };
}

/** The ledger read and written for a run, as the gateway does around opening its store. */
async function started(path: string, clock: WallClock, log: Logger): Promise<ClockLedger> {
  const ledger = await ClockLedger.read(path, clock, log);
  await ledger.start();
  return ledger;
}

function clockAt(c: { wall: number; mono: number }): WallClock {
  return new WallClock({ wall: () => c.wall, mono: () => c.mono });
}

Deno.test("ClockLedger: a step survives a restart, and the stop does not count toward ages", async () => {
  const dir = await Deno.makeTempDir();
  const path = clockLedgerPath(`${dir}/gateway.db`);
  try {
    const c = { wall: T0 - 20 * DAY_MS, mono: 0 };
    const first = clockAt(c);
    const stored = first.now();
    const l1 = await started(path, first, logger().logger);
    c.wall = T0; // NTP answers
    c.mono += 1_000;
    first.now();
    await l1.close();

    // Restarted an hour later (as the clock says): the run before's step still counts, and
    // the hour stopped does not.
    const second = clockAt({ wall: T0 + 3_600_000, mono: 0 });
    const { lines, logger: log } = logger();
    const l2 = await started(path, second, log);
    assert.equal(second.since(stored), 1_000, "aged by the time the gateway ran");
    assert.ok(
      lines.some((l) =>
        l.msg === "The time the gateway was stopped does not count toward stored ages" &&
        l.stopped_s === 3_600
      ),
    );
    await l2.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ClockLedger: a clock behind the last run is logged with both times; nothing moves", async () => {
  const dir = await Deno.makeTempDir();
  const path = clockLedgerPath(`${dir}/gateway.db`);
  try {
    await (await started(path, clockAt({ wall: T0, mono: 0 }), logger().logger)).close();
    const booted = clockAt({ wall: 0, mono: 0 }); // no battery: 1970
    const { lines, logger: log } = logger();
    await (await started(path, booted, log)).close();
    const warn = lines.find((l) => l.level === "warn");
    assert.equal(warn?.now, new Date(0).toISOString());
    assert.equal(warn?.last_run_seen, new Date(T0).toISOString());
    assert.deepEqual(booted.shifts, []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ClockLedger: a malformed file is logged and started afresh", async () => {
  const dir = await Deno.makeTempDir();
  const path = clockLedgerPath(`${dir}/gateway.db`);
  try {
    await Deno.writeTextFile(path, "{not json");
    const { lines, logger: log } = logger();
    await (await started(path, clockAt({ wall: T0, mono: 0 }), log)).close();
    assert.ok(
      lines.some((l) => l.msg === "Clock ledger is malformed; ages count from stored timestamps"),
    );
    assert.notEqual(parseLedger(await Deno.readTextFile(path)), null, "written again whole");
    assert.equal(parseLedger('{"version":2,"shifts":[],"run":{}}'), null);
    assert.deepEqual(
      parseLedger(
        '{"version":1,"shifts":[{"beforeMs":1,"shiftMs":2},{"x":1}],"run":{"startedMs":1,"lastSeenMs":2}}',
      )?.shifts,
      [{ beforeMs: 1, shiftMs: 2 }],
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ClockLedger: read() writes nothing (the store's directory may not exist yet); start() says when it cannot write", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = clockLedgerPath(`${dir}/missing/gateway.db`);
    const ledger = await ClockLedger.read(path, clockAt({ wall: T0, mono: 0 }), logger().logger);
    await assert.rejects(() => ledger.start());
    await ledger.close();
    await assert.rejects(() => Deno.stat(path), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ClockLedger: with no file, the store's newest message stands in for the last sighting", async () => {
  const dir = await Deno.makeTempDir();
  const path = clockLedgerPath(`${dir}/gateway.db`);
  try {
    // Stored with the clock 20 days ahead, the ledger then lost: a warn names both times, and
    // nothing is moved.
    const behind = clockAt({ wall: T0, mono: 0 });
    const { lines, logger: log } = logger();
    const l1 = await ClockLedger.read(path, behind, log);
    assert.equal(l1.missing, true);
    l1.judgeByNewestStored(T0 + 20 * DAY_MS, log);
    await l1.start();
    await l1.close();
    const warn = lines.find((l) => l.level === "warn");
    assert.match(String(warn?.msg), /^Wall clock reads earlier than the newest stored message:/);
    assert.equal(warn?.now, new Date(T0).toISOString());
    assert.equal(warn?.newest_stored, new Date(T0 + 20 * DAY_MS).toISOString());
    assert.equal(warn?.behind_s, 20 * 86_400);
    assert.deepEqual(behind.shifts, []);
    assert.equal((await ClockLedger.read(path, behind, log)).missing, false, "written as usual");

    // Newest message a day old, no ledger: the day does not count toward its age.
    await Deno.remove(path);
    const later = clockAt({ wall: T0 + DAY_MS, mono: 0 });
    const info = logger();
    const l2 = await ClockLedger.read(path, later, info.logger);
    l2.judgeByNewestStored(T0, info.logger);
    assert.equal(later.since(T0), 0, "aged by no time stopped");
    assert.ok(
      info.lines.some((l) =>
        l.msg === "The time the gateway was stopped does not count toward stored ages" &&
        l.level === "info" && l.newest_stored === new Date(T0).toISOString() &&
        l.stopped_s === 86_400
      ),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

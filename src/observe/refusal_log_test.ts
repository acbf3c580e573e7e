import assert from "node:assert/strict";
import { Logger } from "./logger.ts";
import { RefusalLog, type RefusalLogOptions, type RefusalTimers } from "./refusal_log.ts";

/** A refusal log over a test clock and hand-run timers, with its lines and held-back count. */
function harness(o: RefusalLogOptions = {}) {
  const clock = { t: 1_000, now: () => clock.t };
  const lines: Record<string, unknown>[] = [];
  const logger = new Logger("info", (l) => lines.push(JSON.parse(l)));
  const pending = new Map<number, { run: () => void; at: number }>();
  let ids = 0;
  const timers: RefusalTimers = {
    set: (run, ms) => (pending.set(++ids, { run, at: clock.t + ms }), ids),
    clear: (id) => void pending.delete(id as number),
  };
  let suppressed = 0;
  const log = new RefusalLog(logger, clock, () => suppressed++, o, timers);
  /** Moves the clock on and runs the timers that came due. */
  const advance = (ms: number) => {
    clock.t += ms;
    for (const [id, p] of [...pending]) {
      if (p.at <= clock.t) {
        pending.delete(id);
        p.run();
      }
    }
  };
  return { log, lines, advance, pending, suppressed: () => suppressed };
}

Deno.test("RefusalLog.refuse() writes one warn line naming the peer, the listener and the reason", () => {
  const h = harness();
  h.log.refuse("192.0.2.7", "tls", "certificate expired", { client_id: "s7" });
  assert.equal(h.lines.length, 1);
  const { ts: _, ...line } = h.lines[0];
  assert.deepEqual(line, {
    level: "warn",
    msg: "Connection refused",
    remote: "192.0.2.7",
    listener: "tls",
    reason: "certificate expired",
    client_id: "s7",
  });
});

Deno.test("RefusalLog: a flood from one source writes the first lines, then one summary with the count held back, when the window ends", () => {
  const h = harness({ linesPerSource: 5, windowMs: 60_000 });
  for (let i = 0; i < 10_000; i++) h.log.refuse("192.0.2.7", "tls", "unknown CA");
  assert.equal(h.lines.length, 5, "the first five");
  assert.equal(h.suppressed(), 9_995, "the rest counted");
  assert.equal(h.pending.size, 1, "one summary timer, not one per refusal");
  h.advance(59_999);
  assert.equal(h.lines.length, 5, "nothing before the window ends");
  h.advance(1);
  assert.equal(h.lines.length, 6);
  assert.equal(h.lines[5].msg, "Connection refusals not logged (rate limit)");
  assert.equal(h.lines[5].remote, "192.0.2.7");
  assert.equal(h.lines[5].not_logged, 9_995);
  assert.deepEqual(h.lines[5].reasons, { "unknown CA": 9_995 });
  assert.equal(h.pending.size, 0, "no timer once nothing is held back");
  h.log.refuse("192.0.2.7", "tls", "unknown CA");
  assert.equal(h.lines.length, 7, "a new window logs again");
});

Deno.test("RefusalLog: one source's flood does not hold back another source's lines", () => {
  const h = harness({ linesPerSource: 2 });
  for (let i = 0; i < 50; i++) h.log.refuse("192.0.2.7", "tls", "unknown CA");
  h.log.refuse("198.51.100.1", "tcp", "bad user name or password");
  assert.equal(h.lines.length, 3);
  assert.equal(h.lines[2].remote, "198.51.100.1");
});

Deno.test("RefusalLog: the budget over all sources bounds a flood from many addresses", () => {
  const h = harness({ linesPerSource: 5, linesPerWindow: 20, windowMs: 60_000 });
  for (let i = 0; i < 1_000; i++) h.log.refuse(`10.0.${i >> 8}.${i & 255}`, "tls", "unknown CA");
  assert.equal(h.lines.length, 20);
  assert.equal(h.suppressed(), 980);
  h.advance(60_000);
  assert.equal(h.lines.length, 21, "one summary for all sources");
  assert.equal(h.lines[20].sources, "all");
  assert.equal(h.lines[20].not_logged, 980);
});

Deno.test("RefusalLog: the map of sources is bounded; the oldest source goes first, its count reported", () => {
  const h = harness({ linesPerSource: 1, linesPerWindow: 1_000, maxSources: 3 });
  h.log.refuse("10.0.0.1", "tls", "unknown CA");
  h.log.refuse("10.0.0.1", "tls", "unknown CA"); // held back
  h.log.refuse("10.0.0.2", "tls", "unknown CA");
  h.log.refuse("10.0.0.3", "tls", "unknown CA");
  assert.equal(h.lines.length, 3);
  h.log.refuse("10.0.0.4", "tls", "unknown CA"); // evicts 10.0.0.1
  assert.equal(h.lines.length, 5);
  assert.deepEqual([h.lines[3].remote, h.lines[3].not_logged], ["10.0.0.1", 1]);
  assert.equal(h.lines[4].remote, "10.0.0.4");
  h.log.refuse("10.0.0.1", "tls", "unknown CA");
  assert.equal(h.lines.length, 6, "an evicted source starts afresh");
});

Deno.test("RefusalLog: a summary itemises at most eight reasons, the rest as other", () => {
  const h = harness({ linesPerSource: 0 });
  for (let i = 0; i < 20; i++) h.log.refuse("10.0.0.1", "tls", `reason ${i}`);
  h.log.close();
  assert.equal(h.lines.length, 1);
  const reasons = h.lines[0].reasons as Record<string, number>;
  assert.equal(Object.keys(reasons).length, 9);
  assert.equal(reasons.other, 12);
});

Deno.test("RefusalLog.close() reports what is held back and stops its timer", () => {
  const h = harness({ linesPerSource: 1 });
  h.log.refuse("10.0.0.1", "tls", "unknown CA");
  h.log.refuse("10.0.0.1", "tls", "certificate expired");
  h.log.close();
  assert.equal(h.lines.length, 2);
  assert.deepEqual(h.lines[1].reasons, { "certificate expired": 1 });
  assert.equal(h.pending.size, 0);
});

import assert from "node:assert/strict";
import { Logger } from "./logger.ts";
import { Uplink, type UplinkBacklog } from "./uplink.ts";

/** An uplink over a backlog and a forwarded count the test moves, its log lines, its clock. */
function harness() {
  const lines: Record<string, unknown>[] = [];
  const logger = new Logger("debug", (l) => lines.push(JSON.parse(l)));
  const world = { now: 1_000_000, forwarded: 0, backlog: { messages: 0, bytes: 0 } };
  const backlog = (): UplinkBacklog => ({
    ...world.backlog,
    oldestMicros: world.backlog.messages > 0 ? (world.now - 5_000) * 1000 : null,
  });
  const uplink = new Uplink({
    name: "Iggy at test:8090",
    backlog,
    forwarded: () => world.forwarded,
    now: () => world.now,
  }, logger);
  const named = (msg: string) => lines.filter((l) => l.msg === msg);
  return { uplink, world, lines, named };
}

Deno.test("Uplink logs one 'Uplink down' however many lanes report the outage, and keeps the newest reason", () => {
  const { uplink, world, named } = harness();
  uplink.reached("Iggy 0.9");
  world.backlog = { messages: 10, bytes: 40_960 };
  uplink.down("connection reset");
  for (let i = 0; i < 50; i++) uplink.down(`partition ${i}: connection refused`);
  assert.equal(named("Uplink down").length, 1);
  assert.equal(named("Uplink connected").length, 1);
  const down = named("Uplink down")[0];
  assert.equal(down.reason, "connection reset");
  assert.equal(down.waiting_messages, 10);
  assert.equal(down.waiting_bytes, 40_960);
  const f = uplink.fields();
  assert.equal(f.up, false);
  assert.equal(f.reason, "partition 49: connection refused");
  assert.equal(f.since_ms, world.now);
  assert.equal(f.oldest_age_s, 5);
});

Deno.test("Uplink logs 'Uplink up' once what waited is sent: how long it was down, what waited, the drain time", () => {
  const { uplink, world, named } = harness();
  uplink.reached();
  world.forwarded = 100;
  uplink.sample();
  world.backlog = { messages: 300, bytes: 300 * 4096 };
  uplink.down("connection refused");
  world.now += 20_000;
  world.backlog = { messages: 1_000, bytes: 1_000 * 4096 };
  uplink.reached();
  uplink.reached(); // every lane's first send after the outage
  assert.equal(named("Uplink up").length, 0, "not before the backlog is sent");
  assert.equal(uplink.fields().up, true);
  assert.equal(uplink.fields().draining, true);
  world.now += 1_000;
  world.forwarded = 600; // new messages keep coming: the drain ends at what waited
  world.backlog = { messages: 700, bytes: 700 * 4096 };
  uplink.sample();
  assert.equal(uplink.fields().drain_rate, 500);
  assert.equal(named("Uplink up").length, 0);
  world.now += 1_000;
  world.forwarded = 1_100;
  uplink.sample();
  const up = named("Uplink up");
  assert.equal(up.length, 1);
  assert.equal(up[0].down_ms, 20_000);
  assert.equal(up[0].waited_messages, 1_000);
  assert.equal(up[0].waited_bytes, 1_000 * 4096);
  assert.equal(up[0].drain_ms, 2_000);
  assert.equal(uplink.fields().draining, false);
  uplink.sample();
  assert.equal(named("Uplink up").length, 1);
});

Deno.test("Uplink down at start, then up with nothing waiting: one pair of lines, no 'connected' line", () => {
  const { uplink, world, named } = harness();
  uplink.down("connection refused");
  uplink.down("connection refused");
  world.now += 3_000;
  uplink.reached();
  assert.equal(named("Uplink down").length, 1);
  assert.equal(named("Uplink up").length, 1);
  assert.equal(named("Uplink up")[0].down_ms, 3_000);
  assert.equal(named("Uplink up")[0].drain_ms, 0);
  assert.equal(named("Uplink connected").length, 0);
});

Deno.test("Uplink lost again while draining: the first outage's 'Uplink up' says so, then the new 'Uplink down'", () => {
  const { uplink, world, lines } = harness();
  uplink.reached();
  world.backlog = { messages: 50, bytes: 500 };
  uplink.down("reset");
  uplink.reached();
  uplink.down("reset again");
  const msgs = lines.map((l) => l.msg).filter((m) => String(m).startsWith("Uplink "));
  assert.deepEqual(msgs, ["Uplink connected", "Uplink down", "Uplink up", "Uplink down"]);
  assert.equal(lines.find((l) => l.msg === "Uplink up")!.drained, false);
});

Deno.test("Uplink without a count of what went upstream (Iggy mode) logs 'Uplink up' as soon as it is reached", () => {
  const lines: Record<string, unknown>[] = [];
  let now = 5_000;
  const uplink = new Uplink({
    name: "Iggy at test:8090",
    backlog: () => ({ messages: 7, bytes: 0, oldestMicros: null }), // appends always in flight
    now: () => now,
  }, new Logger("info", (l) => lines.push(JSON.parse(l))));
  uplink.reached();
  uplink.down("Iggy closed the connection");
  now += 4_000;
  uplink.reached();
  const up = lines.filter((l) => l.msg === "Uplink up");
  assert.equal(up.length, 1);
  assert.equal(up[0].down_ms, 4_000);
  assert.equal(up[0].drain_ms, 0);
  assert.equal(uplink.fields().draining, false);
});

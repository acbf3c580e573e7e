import assert from "node:assert/strict";
import { type DeadlineOwner, DeadlineWheel } from "./deadline_wheel.ts";

function owner(timeoutMs: number, expired: string[], name: string): DeadlineOwner {
  return { lastActivity: 0, timeoutMs, expire: () => expired.push(name) };
}

Deno.test("DeadlineWheel: expires the silent, re-files the active, forgets the removed", () => {
  let now = 0;
  const wheel = new DeadlineWheel({ now: () => now }, 100);
  const expired: string[] = [];
  const a = owner(1000, expired, "a");
  const b = owner(1000, expired, "b");
  const c = owner(500, expired, "c");
  const none = owner(0, expired, "none");
  for (const o of [a, b, c, none]) wheel.add(o);
  assert.equal(wheel.size, 3, "an owner without a timeout is not tracked");
  wheel.add(a); // re-filed, not tracked twice
  assert.equal(wheel.size, 3);
  now = 600;
  b.lastActivity = 600; // b saw activity: its deadline moves to 1600
  wheel.sweep();
  assert.deepEqual(expired, ["c"]);
  assert.equal(wheel.size, 2);
  wheel.remove(a);
  wheel.remove(a); // removed twice: nothing
  assert.equal(wheel.size, 1);
  now = 1500;
  wheel.sweep();
  assert.deepEqual(expired, ["c"], "a was removed; b's deadline is 1600");
  now = 1600;
  wheel.sweep();
  assert.deepEqual(expired, ["c", "b"]);
  assert.equal(wheel.size, 0);
  // A timeout changed by re-adding: the owner is filed at its new deadline only.
  c.lastActivity = 1600;
  c.timeoutMs = 100;
  wheel.add(c);
  c.timeoutMs = 10_000;
  wheel.add(c);
  now = 1800;
  wheel.sweep();
  assert.deepEqual(expired, ["c", "b"]);
  assert.equal(wheel.size, 1);
});

import assert from "node:assert/strict";
import { DeadlineWheel } from "../base/deadline_wheel.ts";
import { Logger } from "../observe/logger.ts";
import type { SessionContext } from "./context.ts";
import {
  closeAtTokenExpiry,
  type ExpiringConnection,
  MAXIMUM_CONNECT_TIME,
} from "./token_expiry.ts";
import type { TokenPrincipal } from "./token_login.ts";
import { NO_PERMISSIONS } from "../access/permissions.ts";

/** The parts of a context the expiry uses, on a clock the test moves. */
function fakeContext() {
  let now = 1_000;
  const clock = { now: () => now };
  const lines: string[] = [];
  const ctx = {
    clock,
    deadlines: new DeadlineWheel(clock, 250),
    logger: new Logger("info", (l) => lines.push(l)),
  } as unknown as SessionContext;
  return { ctx, lines, advance: (ms: number) => now += ms };
}

class FakeConnection implements ExpiringConnection {
  closed = false;
  said: [number, string][] = [];
  close(): void {
    this.closed = true;
  }
  disconnect(code: number, reason: string): void {
    this.said.push([code, reason]);
    this.closed = true;
  }
}

const WALL = 1_700_000_000_000;
const principal = (validForMs: number): TokenPrincipal => ({
  username: "dev-1",
  permissions: NO_PERMISSIONS,
  tokenValidUntilMs: WALL + validForMs,
});

Deno.test("closeAtTokenExpiry() disconnects with 0xA0 at the token's end, not before", () => {
  const { ctx, lines, advance } = fakeContext();
  const c = new FakeConnection();
  closeAtTokenExpiry(ctx, c, principal(60_000), "dev-1", WALL);
  advance(59_000);
  ctx.deadlines.sweep();
  assert.deepEqual(c.said, []);
  advance(1_250);
  ctx.deadlines.sweep();
  assert.deepEqual(c.said, [[MAXIMUM_CONNECT_TIME, "token expired"]]);
  assert.equal(lines.filter((l) => l.includes("its login token expired")).length, 1);
  assert.equal(ctx.deadlines.size, 0, "the entry is gone once it fired");
});

Deno.test("closeAtTokenExpiry() does nothing for a connection that closed first, nor for a password login", () => {
  const { ctx, lines, advance } = fakeContext();
  const c = new FakeConnection();
  closeAtTokenExpiry(ctx, c, principal(1_000), "dev-1", WALL);
  c.close();
  closeAtTokenExpiry(
    ctx,
    new FakeConnection(),
    { username: "u", permissions: NO_PERMISSIONS },
    "u",
  );
  assert.equal(ctx.deadlines.size, 1, "a password login has no deadline");
  advance(2_000);
  ctx.deadlines.sweep();
  assert.deepEqual(c.said, []);
  assert.deepEqual(lines, []);
});

Deno.test("closeAtTokenExpiry() closes at the next sweep a token that lapsed during its CONNECT", () => {
  const { ctx, advance } = fakeContext();
  const c = new FakeConnection();
  closeAtTokenExpiry(ctx, c, principal(-5), "dev-1", WALL);
  advance(250);
  ctx.deadlines.sweep();
  assert.equal(c.closed, true);
});

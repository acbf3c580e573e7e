import assert from "node:assert/strict";
import { Logger } from "../observe/logger.ts";
import { ConnectionRegistry, type Registered } from "./registry.ts";
import {
  MAX_WATCHED_IDS,
  TAKEOVER_REPEATS,
  TAKEOVER_WINDOW_MS,
  TakeoverWatch,
} from "./takeover_watch.ts";

function connection(remoteAddress: string): Registered & { closed: boolean } {
  const c = {
    remoteAddress,
    closed: false,
    close() {
      c.closed = true;
    },
  };
  return c;
}

function watched(now: () => number) {
  const lines: Record<string, unknown>[] = [];
  const logger = new Logger("info", (l) => lines.push(JSON.parse(l)), now);
  return { lines, watch: new TakeoverWatch(logger, now) };
}

Deno.test("ConnectionRegistry.takeOver(): two devices sharing an id log one warn with the id and both peers", () => {
  let now = 0;
  const { lines, watch } = watched(() => now);
  const registry = new ConnectionRegistry(100, watch);
  const a = "10.0.0.1:5000";
  const b = "10.0.0.2:6000";
  registry.claim("shared", connection(a));
  // The two devices take the id from each other, turn by turn, 10 times a second.
  for (let i = 0; i < 20; i++, now += 100) {
    assert.equal(registry.takeOver("shared", connection(i % 2 === 0 ? b : a)), true);
  }
  assert.equal(lines.length, 1, JSON.stringify(lines));
  assert.equal(lines[0].level, "warn");
  assert.equal(lines[0].client_id, "shared");
  assert.equal(lines[0].takeovers, TAKEOVER_REPEATS);
  assert.deepEqual([lines[0].previous_peer, lines[0].new_peer].sort(), [a, b]);
});

Deno.test("TakeoverWatch: one takeover (a device reconnecting) logs nothing; a new window counts anew", () => {
  let now = 0;
  const { lines, watch } = watched(() => now);
  for (let i = 0; i < TAKEOVER_REPEATS - 1; i++) watch.noted("dev", "a", "b");
  assert.equal(lines.length, 0);
  now += TAKEOVER_WINDOW_MS;
  for (let i = 0; i < TAKEOVER_REPEATS - 1; i++) watch.noted("dev", "a", "b");
  assert.equal(lines.length, 0, "spread over two windows: not 'again and again'");
  watch.noted("dev", "a", "b");
  assert.equal(lines.length, 1);
});

Deno.test("TakeoverWatch: at most MAX_WATCHED_IDS ids per window; the lines of many ids are rate-limited", () => {
  let now = 0;
  const { lines, watch } = watched(() => now);
  for (let id = 0; id < MAX_WATCHED_IDS + 50; id++) {
    for (let i = 0; i < TAKEOVER_REPEATS; i++) watch.noted(`dev-${id}`, "a", "b");
  }
  // Logger.limited: 5 equal lines per 10 s window, then the rest are counted.
  assert.equal(lines.length, 5);
  now += TAKEOVER_WINDOW_MS;
  for (let i = 0; i < TAKEOVER_REPEATS; i++) watch.noted(`dev-${MAX_WATCHED_IDS + 1}`, "a", "b");
  assert.equal(lines.length, 6, "an id past the bound is counted in the next window");
  assert.ok((lines[5].suppressed as number) > 0, "the held-back lines are summarised");
});

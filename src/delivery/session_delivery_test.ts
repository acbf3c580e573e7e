/**
 * SessionDelivery's positions and their stores, over stand-ins for the subscriptions and the
 * log (what is checked is the bookkeeping, not the delivery).
 */
import assert from "node:assert/strict";
import type { LogBackend } from "../log/port.ts";
import { Logger } from "../observe/logger.ts";
import type { StoredSession, StoredSessions } from "../session/stored_sessions.ts";
import type { ClientQueue } from "./client_queue.ts";
import { tripleKey } from "./registry.ts";
import { SessionDelivery } from "./session_delivery.ts";
import type { ClientQueues } from "./subscriber_queues.ts";
import type { Subscriptions } from "./subscribe.ts";

const KEY = tripleKey({ stream: "s", topic: "t", partition: 0 });

function setup(o: {
  start: number;
  readerAt?: number;
  catchUps?: number[];
  storeOffset?: () => Promise<void>;
}) {
  const queue = { lowestUnsettled: () => new Map() } as unknown as ClientQueue;
  const subs = {
    catchUps: new Map([[
      queue,
      new Set((o.catchUps ?? []).map((p) => ({ key: KEY, position: p }))),
    ]]),
    registry: {
      ofClient: () => new Map([["f", { startOffsets: new Map([[KEY, o.start]]) }]]),
    },
    readers: new Map(o.readerAt === undefined ? [] : [[KEY, { position: o.readerAt }]]),
  } as unknown as Subscriptions;
  const stores: number[] = [];
  const backend: Pick<LogBackend, "getOffset" | "storeOffset"> = {
    getOffset: () => Promise.resolve(null),
    storeOffset: (_c, _t, offset) => {
      stores.push(offset);
      return o.storeOffset?.() ?? Promise.resolve();
    },
  };
  const session: StoredSession = {
    clientId: "c",
    subscriptions: new Map([["f", 1]]),
    triples: new Set(),
    expiryS: 60,
    offlineSinceMs: null,
    savedAtMs: 0,
  };
  const sessions = { save() {}, offline() {} } as unknown as StoredSessions;
  const d = new SessionDelivery({
    subscriptions: subs,
    clients: { all: () => [] } as unknown as ClientQueues,
    sessions,
    backend,
    logger: new Logger("error"),
    commitIntervalMs: 60_000,
  });
  return { d, queue, session, stores };
}

Deno.test("two catch-ups on one triple: the position is the lower of the two", async () => {
  for (const catchUps of [[2, 5], [5, 2]]) {
    const { d, queue } = setup({ start: Infinity, catchUps });
    assert.deepEqual([...d.positions(queue)], [[KEY, 2]]);
    await d.stop();
  }
});

Deno.test("a failed position store is tried again, and its triple joins the record only once stored", async () => {
  let fail = true;
  const { d, queue, session, stores } = setup({
    start: 3,
    readerAt: 7,
    storeOffset: () => fail ? Promise.reject(new Error("backend down")) : Promise.resolve(),
  });
  d.detached(queue, session);
  await d.stop();
  assert.deepEqual(stores, [6]);
  assert.equal(session.triples.has(KEY), false, "no stored offset: not a triple from 0");
  fail = false;
  d.detached(queue, session);
  await d.stop();
  assert.deepEqual(stores, [6, 6]);
  assert.equal(session.triples.has(KEY), true);
  d.detached(queue, session);
  await d.stop();
  assert.deepEqual(stores, [6, 6], "stored already: not again");
});

Deno.test("a triple at offset 0 joins the record at once (nothing to store)", async () => {
  const { d, queue, session, stores } = setup({ start: 0, readerAt: 0 });
  d.detached(queue, session);
  await d.stop();
  assert.deepEqual(stores, []);
  assert.equal(session.triples.has(KEY), true);
});

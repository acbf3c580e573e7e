import assert from "node:assert/strict";
import { Logger } from "../observe/logger.ts";
import type { StoredSession } from "../session/stored_sessions.ts";
import type { PartitionAddress, TopicInfo } from "../log/port.ts";
import { handleAdmin, MAX_LISTED } from "./admin.ts";
import { AdminSource } from "./admin_source.ts";

function session(clientId: string, offlineSinceMs: number | null): StoredSession {
  return {
    clientId,
    subscriptions: new Map([["a/#", { qos: 1 }]]),
    triples: new Set(),
    expiryS: 60,
    offlineSinceMs,
    savedAtMs: 0,
  } as unknown as StoredSession;
}

/** An admin source over `sessions` stored sessions and `topics` topics of 2 partitions each. */
function source(sessions: number, topics: number, logs: string[] = []) {
  const stored = Array.from({ length: sessions }, (_, i) => session(`s-${i}`, i * 1000));
  const infos: TopicInfo[] = Array.from({ length: topics }, (_, i) => ({
    stream: "s",
    topic: `t${i}`,
    partitions: 2,
  }));
  return new AdminSource({
    registry: { all: () => [] },
    sessions: {
      list: () => stored,
      get: (id) => stored.find((s) => s.clientId === id),
      remove: () => {},
      expiryOf: (s) => s.expiryS,
    },
    backend: {
      kind: "embedded",
      listTopics: () => Promise.resolve(infos),
      nextOffset: () => Promise.resolve(0),
      partitionBytes: (a: PartitionAddress) =>
        Promise.resolve({
          start: 0,
          next: 10 + a.partition,
          retainedBytes: 100 * Number(a.topic.slice(1)),
          appendedBytes: 0,
        }),
    },
    logger: new Logger("info", (l) => logs.push(l)),
  });
}

async function get(src: AdminSource, path: string) {
  const url = new URL(`http://x/admin/${path}`);
  const res = await handleAdmin(new Request(url), url, src, { token: "" })!;
  return { status: res.status, body: await res.json() };
}

Deno.test("admin listings hold at most MAX_LISTED rows (?limit= fewer), and count every one", async () => {
  const src = source(MAX_LISTED + 5, 0);
  const all = await get(src, "sessions");
  assert.equal(all.body.total, MAX_LISTED + 5);
  assert.equal(all.body.listed, MAX_LISTED);
  assert.equal(all.body.sessions.length, MAX_LISTED);
  const two = await get(src, "sessions?limit=2");
  assert.deepEqual(two.body.sessions.map((s: { client_id: string }) => s.client_id), [
    "s-0",
    "s-1",
  ]);
  assert.deepEqual(two.body.sessions[1], {
    client_id: "s-1",
    owner: null,
    protocol: "3.1.1",
    connected: false,
    offline_since_ms: 1000,
    expiry_s: 60,
    expires_at_ms: 61_000,
    subscriptions: ["a/#"],
    triples: 0,
  });
  for (const bad of ["0", "1001", "x", "-1"]) {
    const r = await get(src, `sessions?limit=${bad}`);
    assert.equal(r.status, 400, bad);
    assert.match(r.body.error, /limit must be an integer from 1 to 1000/);
  }
});

Deno.test("AdminSource.topics() sums partitions, lists the largest first, and stops at its partition bound", async () => {
  const src = source(0, 4);
  const all = (await src.topics())!;
  assert.equal(all.partial, false);
  assert.deepEqual(all.topics.map((t) => [t.topic, t.messages, t.bytes]), [
    ["t3", 21, 600],
    ["t2", 21, 400],
    ["t1", 21, 200],
    ["t0", 21, 0],
  ]);
  const bounded = (await src.topics(5))!;
  assert.equal(bounded.partial, true, "4 topics of 2 partitions: 2 topics fit in 5");
  assert.deepEqual(bounded.topics.map((t) => t.topic), ["t1", "t0"]);
  const listed = await get(src, "topics?limit=1");
  assert.equal(listed.body.total, 4);
  assert.equal(listed.body.topics[0].partitions.length, 2);
});

Deno.test("an admin write with no token configured is refused, logged, and changes nothing", async () => {
  const logs: string[] = [];
  const src = source(1, 0, logs);
  const url = new URL("http://x/admin/log-level?level=debug");
  const res = await handleAdmin(
    new Request(url, { method: "POST" }),
    url,
    src,
    { token: "" },
    "10.0.0.9:5",
  )!;
  assert.equal(res.status, 403);
  assert.equal(src.logger.level, "info");
  assert.equal(logs.length, 1);
  assert.match(
    logs[0],
    /"msg":"Admin action refused","action":"POST \/admin\/log-level","peer":"10\.0\.0\.9:5"/,
  );
});

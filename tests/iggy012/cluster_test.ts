/**
 * `iggy.address` with two nodes of one (fake) Iggy 0.12 cluster: partition requests go to the
 * partition's primary from its route, a NotPrimary answer re-routes, metadata goes to any live
 * node, and a node that is down fails over.
 */
import assert from "node:assert/strict";
import { IggyBackend } from "../../src/log/iggy/mod.ts";
import { BackendError } from "../../src/log/port.ts";
import { ClusterPool } from "../../src/log/iggy/cluster.ts";
import { DialectChooser, SessionKeeper } from "../../src/log/iggy/dialect.ts";
import { fakeIggyConfig, FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";
import { waitFor } from "../helpers/gateway.ts";

const A = { stream: "s", topic: "t", partition: 0 };
const msg = (text: string) => ({ payload: new TextEncoder().encode(text), headers: new Map() });
const sends = (n: FakeNode) => n.seen.filter((r) => r.code === 101);

async function cluster() {
  const store = new FakeStore();
  const nodes = [0, 1].map((replicaId) => new FakeNode({ dialect: "0.12", store, replicaId }));
  const b = new IggyBackend(fakeIggyConfig({ protocol: "0.12" }), {
    patUsername: "",
    cacheTtlMs: 0,
  }, { dials: nodes.map((n) => n.dial) });
  await b.open();
  return {
    store,
    nodes,
    b,
    async close() {
      await b.close();
      for (const n of nodes) await n.close();
    },
  };
}

Deno.test("cluster: a send goes to the partition's primary; NotPrimary re-routes to the new one", async () => {
  const c = await cluster();
  try {
    await c.b.createTopic("s", "t", { partitions: 1 });
    c.store.movePrimary("s", "t", 0, 1);
    assert.equal((await c.b.append({ ...A, messages: [msg("to 1")] })).baseOffset, 0);
    assert.deepEqual([sends(c.nodes[0]).length, sends(c.nodes[1]).length], [0, 1]);
    c.store.movePrimary("s", "t", 0, 0); // the cached route still names replica 1
    assert.equal((await c.b.append({ ...A, messages: [msg("to 0")] })).baseOffset, 1);
    assert.deepEqual([sends(c.nodes[0]).length, sends(c.nodes[1]).length], [1, 2]);
    assert.deepEqual(c.store.payloads("s", "t", 0), ["to 1", "to 0"], "no duplicate");
    const polls = (await c.b.poll(A, 0, 10)).map((m) => new TextDecoder().decode(m.payload));
    assert.deepEqual(polls, ["to 1", "to 0"]);
    assert.equal(
      c.nodes[1].seen.filter((r) => r.code === 100).length,
      0,
      "polls go to the primary",
    );
  } finally {
    await c.close();
  }
});

Deno.test("cluster: with a node down, metadata and partitions it does not lead fail over", async () => {
  const c = await cluster();
  try {
    await c.b.createTopic("s", "t", { partitions: 2 });
    c.store.movePrimary("s", "t", 1, 1);
    c.nodes[0].down = true;
    c.nodes[0].dropAll();
    assert.equal((await c.b.getTopic("s", "t"))?.partitions, 2, "metadata from the live node");
    const p1 = { ...A, partition: 1 };
    assert.equal((await c.b.append({ ...p1, messages: [msg("p1")] })).baseOffset, 0);
    // Partition 0's primary is down: refused until the cluster moves it.
    await assert.rejects(c.b.append({ ...A, messages: [msg("p0")] }), BackendError);
    c.store.movePrimary("s", "t", 0, 1);
    assert.equal((await c.b.append({ ...A, messages: [msg("p0")] })).baseOffset, 0);
    assert.deepEqual(c.store.payloads("s", "t", 0), ["p0"]);
  } finally {
    await c.close();
  }
});

Deno.test("ClusterPool.retire() replaces a session (its producer ids ran out) by a fresh Register", async () => {
  const node = new FakeNode({ dialect: "0.12", store: new FakeStore() });
  const pool = new ClusterPool([node.dial], {
    chooser: new DialectChooser("0.12"),
    sessions: new SessionKeeper(),
    credentials: { kind: "password", username: "iggy", password: "iggy" },
    size: 2,
    requestTimeoutMs: 1000,
    heartbeatMs: 0,
    reconnectMaxMs: 20,
  });
  try {
    await pool.open();
    const first = pool.registration!.session;
    const before = node.seen.length;
    pool.retire(first);
    await waitFor(
      () => pool.registration?.session !== undefined && pool.registration.session !== first,
      5000,
      "a fresh session to replace the retired one",
    );
    assert.notEqual(pool.registration?.session, first);
    const after = node.seen.slice(before);
    assert.ok(after.some((r) => r.operation === 1), "a fresh Register");
    assert.ok(after.every((r) => r.session !== first), "nothing binds to the retired session");
  } finally {
    await pool.close();
    await node.close();
  }
});

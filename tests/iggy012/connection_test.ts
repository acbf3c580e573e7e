/**
 * IggyConnection012 against a fake 0.12 node: the in-flight window bound, a timeout that fails
 * one request while the connection lives on, and silence that closes it.
 */
import assert from "node:assert/strict";
import { IggyTimeoutError } from "../../src/log/iggy/codes.ts";
import { IggyConnection012 } from "../../src/log/iggy/v12/pipelined_connection.ts";
import { FakeNode, FakeStore, type HookAction } from "../helpers/fake_iggy/mod.ts";
import type { FakeRequest } from "../helpers/fake_iggy/wire.ts";
import { loadHashes } from "../../src/base/xxhash.ts";
import { waitFor } from "../helpers/gateway.ts";

await loadHashes();
const iggy = { kind: "password" as const, username: "iggy", password: "iggy" };

async function connected(
  hook: (r: FakeRequest) => HookAction,
  o: { maxPending?: number; timeoutMs?: number } = {},
): Promise<{ c: IggyConnection012; node: FakeNode }> {
  const node = new FakeNode({ dialect: "0.12", store: new FakeStore(), hook });
  const c = new IggyConnection012(await node.dial(), {
    timeoutMs: o.timeoutMs ?? 1000,
    label: "t",
    maxPending: o.maxPending,
  });
  await c.register(iggy);
  return { c, node };
}

Deno.test("IggyConnection012 holds at most maxPending requests in flight; the rest wait", async () => {
  let hold = true;
  /** For each ping the node received: were the held replies released by then? */
  const afterRelease: boolean[] = [];
  const { c, node } = await connected((r) => {
    if (r.code !== 1) return undefined;
    afterRelease.push(!hold);
    return hold ? "hold" : undefined;
  }, { maxPending: 2 });
  const pings = [c.request(1), c.request(1), c.request(1)];
  await waitFor(() => node.heldCount >= 2, 5000, "two pings held by the node");
  assert.equal(node.seen.filter((r) => r.code === 1).length, 2, "the third waits for a slot");
  assert.equal(c.load, 3);
  hold = false;
  node.releaseHeld();
  await Promise.all(pings);
  assert.equal(node.seen.filter((r) => r.code === 1).length, 3);
  // Causal, not timed: the third ping reached the node only once a reply freed a slot.
  assert.deepEqual(afterRelease, [false, false, true], "the third was sent after a reply");
  await c.close();
  await node.close();
});

Deno.test("IggyConnection012: a request without reply times out alone while others are answered", async () => {
  let first = true;
  const { c, node } = await connected((r) => {
    if (r.code !== 201 || !first) return undefined;
    first = false;
    return "hold"; // never released
  }, { timeoutMs: 300 });
  const lost = c.request(201);
  const beat = setInterval(() => c.request(1).catch(() => {}), 50);
  await assert.rejects(lost, IggyTimeoutError);
  clearInterval(beat);
  assert.equal(c.isClosed, false, "the server still answers: the connection lives on");
  await c.request(201);
  await c.close();
  await node.close();
});

Deno.test("IggyConnection012: when nothing comes back within the timeout the connection closes", async () => {
  const { c, node } = await connected((r) => (r.code === 201 ? "hold" : undefined), {
    timeoutMs: 200,
  });
  await assert.rejects(c.request(201), IggyTimeoutError);
  assert.equal(c.isClosed, true);
  await c.close();
  await node.close();
});

Deno.test("IggyConnection012: a write that never completes times out the request without an unhandled rejection", async () => {
  let closeReadable = () => {};
  const readable = new ReadableStream<Uint8Array>({
    start(c) {
      closeReadable = () => {
        try {
          c.close();
        } catch { /* already closed */ }
      };
    },
  });
  const writable = new WritableStream<Uint8Array>({ write: () => new Promise(() => {}) });
  const c = new IggyConnection012({ readable, writable, close: () => closeReadable() }, {
    timeoutMs: 50,
    label: "stuck",
  });
  await assert.rejects(c.request(1), IggyTimeoutError);
  assert.equal(c.isClosed, true, "nothing came back: the connection is taken for dead");
});

Deno.test("IggyConnection012: unbound requests (all id 0) go one at a time and each gets its reply", async () => {
  const node = new FakeNode({ dialect: "0.12", store: new FakeStore() });
  const c = new IggyConnection012(await node.dial(), { timeoutMs: 500, label: "unbound" });
  try {
    const pings = await Promise.all([c.request(1), c.request(1), c.request(1)]);
    assert.equal(pings.length, 3);
    assert.equal(node.seen.filter((r) => r.code === 1 && r.request === 0n).length, 3);
  } finally {
    await c.close();
    await node.close();
  }
});

import assert from "node:assert/strict";
import { Code, IggyConnectionError, IggyEvictionError, NotSentError, Operation } from "./codes.ts";
import {
  evictionFrame,
  FakeServer,
  registerPayload,
  replyFrame,
  resultOk,
} from "../../../tests/helpers/fake_iggy/frames.ts";
import { backoffDelay, IggyPool, UP_FOR_MS } from "./pool.ts";
import { DialectChooser } from "./dialect.ts";
import { loadHashes } from "../../base/xxhash.ts";
import { waitFor } from "../../../tests/helpers/wait.ts";

await loadHashes();

Deno.test("backoffDelay() doubles from 100 ms, caps at reconnect_max_ms, jitters in [d/2, d]", () => {
  assert.equal(backoffDelay(0, 5000, () => 0), 50);
  assert.equal(backoffDelay(0, 5000, () => 1), 100);
  assert.equal(backoffDelay(3, 5000, () => 1), 800);
  assert.equal(backoffDelay(20, 5000, () => 1), 5000);
  assert.equal(backoffDelay(20, 5000, () => 0), 2500);
});

function server(): FakeServer {
  return new FakeServer((req) => {
    if (req.operation === 1) {
      return [replyFrame({ operation: 1, body: resultOk(registerPayload(0, 9n)) })];
    }
    return [replyFrame({ operation: req.operation, body: new Uint8Array([7]) })];
  });
}

const base = {
  chooser: new DialectChooser("0.11"),
  credentials: { kind: "password" as const, username: "iggy", password: "iggy" },
  requestTimeoutMs: 500,
  heartbeatMs: 0,
  reconnectMaxMs: 20,
};

Deno.test("IggyPool.open() resolves once a connection is registered and routes requests", async () => {
  const s = server();
  const pool = new IggyPool({ ...base, dial: s.dial, size: 2 });
  await pool.open();
  assert.ok(pool.ready);
  assert.deepEqual(await pool.request(Code.PING), new Uint8Array([7]));
  await pool.close();
  assert.ok(!pool.ready);
  await assert.rejects(pool.request(Code.PING), IggyConnectionError);
});

Deno.test("IggyPool reconnects and registers again after the server drops its connections", async () => {
  const s = server();
  const pool = new IggyPool({ ...base, dial: s.dial, size: 1 });
  await pool.open();
  s.dropAll();
  await new Promise((r) => setTimeout(r, 0));
  assert.ok(!pool.ready);
  await waitFor(() => pool.ready, 5000, "the pool to reconnect");
  const registers = s.seen.filter((r) => r.operation === 1);
  assert.equal(registers.length, 2);
  assert.notEqual(registers[0].client, registers[1].client, "fresh client id per Register");
  await pool.close();
});

Deno.test("IggyPool.open() rejects with the login error when every slot fails", async () => {
  const s = new FakeServer(() => [evictionFrame(9)]);
  const pool = new IggyPool({ ...base, dial: s.dial, size: 2 });
  await assert.rejects(
    pool.open(),
    (e) => e instanceof IggyEvictionError && /invalid credentials/.test(e.message),
  );
  assert.ok(!pool.ready);
});

Deno.test("IggyPool pings idle connections every heartbeat_interval_ms", async () => {
  const s = server();
  const pool = new IggyPool({ ...base, dial: s.dial, size: 1, heartbeatMs: 10 });
  await pool.open();
  await waitFor(() => s.seen.some((r) => r.code === Code.PING), 5000, "a heartbeat PING");
  assert.ok(s.seen.some((r) => r.code === Code.PING && r.operation === 2));
  await pool.close();
});

/** A server that cuts every connection under the request `cut` picks, once per request kind. */
function cutting(cut: (req: { operation: number; code: number }) => boolean): FakeServer {
  const s: FakeServer = new FakeServer((req) => {
    if (req.operation === 1) {
      return [replyFrame({ operation: 1, body: resultOk(registerPayload(0, 9n)) })];
    }
    if (!cut(req)) return [replyFrame({ operation: req.operation, body: new Uint8Array([7]) })];
    queueMicrotask(() => s.dropAll()); // the request was written: its reply is lost
    return [];
  });
  return s;
}

Deno.test("IggyPool: a read cut off with a connection that had been up goes again on a fresh one at once; a send fails", async () => {
  let cuts = 0;
  const s = cutting((r) =>
    (r.code === Code.PING || r.operation === Operation.SEND_MESSAGES) && cuts++ % 2 === 0
  );
  const pool = new IggyPool({ ...base, dial: s.dial, size: 1 });
  await pool.open();
  await new Promise((r) => setTimeout(r, UP_FOR_MS)); // the connection has been up
  assert.deepEqual(await pool.request(Code.PING), new Uint8Array([7]));
  assert.equal(s.seen.filter((r) => r.operation === 1).length, 2, "a fresh Register");
  await new Promise((r) => setTimeout(r, UP_FOR_MS));
  const frame = new Uint8Array(256 + 8);
  await assert.rejects(
    pool.request(Code.SEND_MESSAGES, frame, true),
    (e) => e instanceof IggyConnectionError && !(e instanceof NotSentError),
  );
  assert.equal(
    s.seen.filter((r) => r.operation === Operation.SEND_MESSAGES).length,
    1,
    "not resent",
  );
  await pool.close();
});

Deno.test("IggyPool: a request that finds no connection while the slot reconnects at once waits for the fresh one", async () => {
  const s = server();
  let hold = false;
  const open = Promise.withResolvers<void>();
  const dial = async () => {
    if (hold) await open.promise;
    return s.dial();
  };
  const pool = new IggyPool({ ...base, dial, size: 1 });
  await pool.open();
  await new Promise((r) => setTimeout(r, UP_FOR_MS)); // the connection has been up
  hold = true; // the reconnect waits for open
  s.dropAll();
  await waitFor(() => !pool.ready, 1000, "the pool to see its connection gone");
  const ping = pool.request(Code.PING);
  open.resolve();
  assert.deepEqual(await ping, new Uint8Array([7]), "not a NotSentError");
  await pool.close();
});

Deno.test("IggyPool: a connection that dies before UP_FOR_MS counts as a failed connect: the slot backs off", async () => {
  const s = cutting((r) => r.code === Code.PING);
  const pool = new IggyPool({
    ...base,
    dial: s.dial,
    size: 1,
    reconnectMaxMs: 60_000,
    random: () => 1,
  });
  await pool.open();
  // The PING is a read, so it would go again on a fresh connection: the slot backs off instead.
  await assert.rejects(pool.request(Code.PING), NotSentError);
  assert.equal(s.dials, 1, "no second login while backing off");
  await pool.close();
});

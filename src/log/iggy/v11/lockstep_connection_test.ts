import assert from "node:assert/strict";
import {
  Code,
  IggyConnectionError,
  IggyError,
  IggyEvictionError,
  IggyTimeoutError,
} from "../codes.ts";
import { IggyConnection, RequestIds } from "./lockstep_connection.ts";
import { NotSentError } from "../codes.ts";
import {
  evictionFrame,
  FakeServer,
  registerPayload,
  replyFrame,
  resultOk,
  type SeenRequest,
} from "../../../../tests/helpers/fake_iggy/frames.ts";
import { loadHashes } from "../../../base/xxhash.ts";

await loadHashes();

/** Answers Register with session 77, metadata ops with an empty result, reads with [1]. */
function happy(req: SeenRequest): Uint8Array[] {
  if (req.operation === 1) {
    return [replyFrame({ operation: 1, body: resultOk(registerPayload(5, 77n)) })];
  }
  if (req.operation >= 128 && req.operation < 160) {
    return [replyFrame({ operation: req.operation, request: req.request, body: resultOk() })];
  }
  return [
    replyFrame({ operation: req.operation, request: req.request, body: new Uint8Array([1]) }),
  ];
}

async function connected(server: FakeServer, timeoutMs = 1000): Promise<IggyConnection> {
  const c = new IggyConnection(await server.dial(), { timeoutMs, label: "t" });
  await c.register({ kind: "password", username: "iggy", password: "iggy" });
  return c;
}

Deno.test("RequestIds: metadata advances from 1, partition and read ops reuse the counter", () => {
  const ids = new RequestIds();
  assert.equal(ids.next("read"), 1n);
  assert.equal(ids.next("partition"), 1n);
  assert.equal(ids.next("metadata"), 1n);
  assert.equal(ids.next("metadata"), 2n);
  assert.equal(ids.next("partition"), 3n);
  assert.equal(ids.next("read"), 3n);
});

Deno.test("IggyConnection.register() sends Register with session 0, request 0, a non-zero client", async () => {
  const server = new FakeServer(happy);
  const c = await connected(server);
  const [reg] = server.seen;
  assert.equal(reg.operation, 1);
  assert.equal(reg.request, 0n);
  assert.equal(reg.session, 0n);
  assert.notEqual(reg.client, 0n);
  assert.equal(reg.code, 0, "no command code for a replicated operation");
  assert.equal(new DataView(reg.body.buffer).getUint32(0, true), 0x2c00, "protocol 0.11.0");
  assert.equal(c.registration?.session, 77n);
  assert.equal(c.registration?.userId, 5);
  await c.close();
});

Deno.test("IggyConnection.request() stamps client, session and request ids as the protocol assigns them", async () => {
  const server = new FakeServer(happy);
  const c = await connected(server);
  await c.request(Code.GET_TOPIC, new Uint8Array([1]));
  await c.request(Code.CREATE_STREAM, new Uint8Array([1, 0x61]));
  await c.request(Code.SEND_MESSAGES, new Uint8Array([0]));
  await c.request(Code.CREATE_TOPIC, new Uint8Array([0]));
  await c.request(Code.POLL_MESSAGES, new Uint8Array([0]));
  const [reg, ...rest] = server.seen;
  assert.deepEqual(
    rest.map((r) => [r.operation, r.request, r.code]),
    [[2, 1n, 300], [128, 1n, 0], [160, 2n, 0], [132, 2n, 0], [2, 3n, 100]],
  );
  for (const r of rest) {
    assert.equal(r.client, reg.client, "same client id as the Register");
    assert.equal(r.session, 77n, "bound session");
  }
  await c.close();
});

Deno.test("IggyConnection keeps one request in flight (lockstep)", async () => {
  let inFlight = 0;
  let maxInFlight = 0;
  const queued: (() => void)[] = [];
  const server = new FakeServer((req) => {
    if (req.operation === 1) return happy(req);
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    queued.push(() => inFlight--);
    return happy(req);
  });
  const c = await connected(server);
  await Promise.all([1, 2, 3].map(() => c.request(Code.PING).then(() => queued.shift()?.())));
  assert.equal(maxInFlight, 1);
  await c.close();
});

Deno.test("IggyConnection.request() times out on silence and closes the connection", async () => {
  const server = new FakeServer((req) => (req.operation === 1 ? happy(req) : []));
  const c = await connected(server, 50);
  const first = c.request(Code.GET_TOPIC, new Uint8Array([1]));
  const second = c.request(Code.GET_TOPIC, new Uint8Array([1]));
  await assert.rejects(first, IggyTimeoutError);
  await assert.rejects(second, NotSentError, "queued request never reached the socket");
  assert.ok(c.isClosed);
  assert.ok((await c.closed) instanceof IggyTimeoutError);
  await c.close();
});

Deno.test("IggyConnection: a non-zero reply status rejects with that IggyError code", async () => {
  const server = new FakeServer((req) =>
    req.operation === 1 ? happy(req) : [replyFrame({ operation: req.operation, status: 3007 })]
  );
  const c = await connected(server);
  await assert.rejects(
    c.request(Code.POLL_MESSAGES),
    (e) => e instanceof IggyError && e.code === 3007,
  );
  assert.ok(!c.isClosed, "a denial keeps the session");
  await c.close();
});

Deno.test("IggyConnection: an eviction rejects the request and kills the connection", async () => {
  const server = new FakeServer((req) => (req.operation === 1 ? happy(req) : [evictionFrame(13)]));
  const c = await connected(server);
  await assert.rejects(
    c.request(Code.PING),
    (e) => e instanceof IggyEvictionError && e.code === 30,
  );
  assert.ok(c.isClosed);
  await c.close();
});

Deno.test("IggyConnection.register() reports an incompatible server naming both versions", async () => {
  const server = new FakeServer(() => [evictionFrame(14, 0x3000, 0x3000)]);
  const c = new IggyConnection(await server.dial(), { timeoutMs: 1000, label: "t" });
  await assert.rejects(
    c.register({ kind: "password", username: "iggy", password: "iggy" }),
    (e) =>
      e instanceof IggyEvictionError && /0\.12\.0/.test(e.message) && /0\.11\.0/.test(e.message),
  );
  await c.close();
});

Deno.test("IggyConnection.register() with a token puts it in the credential slot", async () => {
  const server = new FakeServer(happy);
  const c = new IggyConnection(await server.dial(), { timeoutMs: 1000, label: "t" });
  await c.register({ kind: "token", token: "secret" });
  const body = server.seen[0].body;
  // version(4) + name + version name, then [len:u8][token][ctx:u32]
  const tail = body.subarray(body.length - 4 - 1 - 6);
  assert.equal(tail[0], 6);
  assert.equal(new TextDecoder().decode(tail.subarray(1, 7)), "secret");
  await c.close();
});

Deno.test("IggyConnection: the peer closing rejects the pending request", async () => {
  const server = new FakeServer((req) => {
    if (req.operation !== 1) queueMicrotask(() => server.dropAll());
    return req.operation === 1 ? happy(req) : [];
  });
  const c = await connected(server);
  await assert.rejects(c.request(Code.PING), /closed/);
  await c.close();
});

function transientOnce(status: number, operation: number): FakeServer {
  let denied = false;
  return new FakeServer((req) => {
    if (req.operation === operation && !denied) {
      denied = true;
      return [replyFrame({ operation, request: req.request, status })];
    }
    return happy(req);
  });
}

Deno.test("IggyConnection replays a send answered 58 TransientNotAccepted (never admitted)", async () => {
  const server = transientOnce(58, 160);
  const c = await connected(server);
  await c.request(Code.SEND_MESSAGES, new Uint8Array([0]));
  const sends = server.seen.filter((r) => r.operation === 160);
  assert.equal(sends.length, 2);
  assert.equal(sends[0].request, sends[1].request, "same request id");
  await c.close();
});

Deno.test("IggyConnection: a connection lost while a 58 replay waits fails the send with the 58 at once", async () => {
  const server = new FakeServer((req) => {
    if (req.operation !== 160) return happy(req);
    queueMicrotask(() => server.dropAll()); // after the refusal is on its way
    return [replyFrame({ operation: 160, request: req.request, status: 58 })];
  });
  const c = await connected(server, 60_000);
  await assert.rejects(
    c.request(Code.SEND_MESSAGES, new Uint8Array([0])),
    (e) => e instanceof IggyError && e.code === 58,
  );
  assert.equal(server.seen.filter((r) => r.operation === 160).length, 1, "no replay written");
  await c.close();
});

Deno.test("IggyConnection does not replay a send answered 57 TransientNotCommitted", async () => {
  const server = transientOnce(57, 160);
  const c = await connected(server);
  await assert.rejects(
    c.request(Code.SEND_MESSAGES, new Uint8Array([0])),
    (e) => e instanceof IggyError && e.code === 57,
  );
  assert.equal(server.seen.filter((r) => r.operation === 160).length, 1);
  await c.close();
});

Deno.test("IggyConnection replays a metadata op answered 57 with the same request id", async () => {
  const server = transientOnce(57, 128);
  const c = await connected(server);
  await c.request(Code.CREATE_STREAM, new Uint8Array([1, 0x61]));
  const creates = server.seen.filter((r) => r.operation === 128);
  assert.deepEqual(creates.map((r) => r.request), [1n, 1n]);
  await c.close();
});

Deno.test("a request whose write never completes fails at the timeout, with no unhandled rejection", async () => {
  // A server that stopped reading: the socket's write never completes, even after close.
  let readable!: ReadableStreamDefaultController<Uint8Array>;
  const stalled = {
    readable: new ReadableStream<Uint8Array>({ start: (c) => void (readable = c) }),
    writable: new WritableStream<Uint8Array>({ write: () => new Promise<void>(() => {}) }),
    close() {
      try {
        readable.close();
      } catch { /* already closed */ }
    },
  };
  const c = new IggyConnection(stalled, { timeoutMs: 50, label: "stalled" });
  // PING needs no login; the timeout rejects the reply while the write is still pending.
  const e = await c.request(Code.PING).catch((err) => err);
  assert.ok(e instanceof IggyTimeoutError, String(e));
  assert.equal(c.isClosed, true, "the timed-out connection is closed for good");
  await c.close();
});

Deno.test("the one request timer per connection: a later request still gets its whole timeout", async () => {
  // Register is answered, the PING after it never is.
  const server = new FakeServer((req) => req.operation === 1 ? happy(req) : []);
  const c = await connected(server, 200);
  // Idle past most of Register's timeout, so the timer armed then fires during the PING.
  await new Promise((r) => setTimeout(r, 150));
  const sent = Date.now();
  const e = await c.request(Code.PING).catch((err) => err);
  const waited = Date.now() - sent;
  assert.ok(e instanceof IggyTimeoutError, String(e));
  assert.ok(waited >= 195, `timed out after ${waited} ms, before its 200 ms`);
  assert.equal(c.isClosed, true);
  await c.close();
});

Deno.test("IggyConnection: a reply to another request id fails the waiting request and the connection, never answering it", async () => {
  let first = true;
  const server = new FakeServer((req) => {
    if (req.operation === 1 || !first) return happy(req);
    first = false;
    return [replyFrame({ operation: req.operation, request: 99n, body: new Uint8Array([2]) })];
  });
  const c = await connected(server);
  await assert.rejects(
    c.request(Code.POLL_MESSAGES),
    (e) =>
      e instanceof IggyConnectionError &&
      /a reply to request 99 came while request 1 waited/.test(e.message),
  );
  assert.ok(c.isClosed, "the connection is closed");
  await c.close();
});

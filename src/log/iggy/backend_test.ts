import assert from "node:assert/strict";
import type { GatewayConfig } from "../../config/types.ts";
import { BackendError } from "../port.ts";
import { IggyBackend } from "./backend.ts";
import { Code } from "./codes.ts";
import {
  evictionFrame,
  FakeServer,
  registerPayload,
  replyFrame,
  resultOk,
  type SeenRequest,
} from "../../../tests/helpers/fake_iggy/frames.ts";
import { topicBody } from "../../../tests/helpers/fake_iggy/records.ts";

const config: GatewayConfig["iggy"] = {
  address: "127.0.0.1:1",
  protocol: "0.11", // the frame-level fake speaks 0.11 only
  username: "iggy",
  password: "iggy",
  token: "",
  tls: false,
  tls_ca_file: "",
  tls_server_name: "",
  request_timeout_ms: 200,
  pool_size: 1,
  heartbeat_interval_ms: 0,
  reconnect_max_ms: 50,
  batch_max_messages: 100,
  batch_max_bytes: 1 << 20,
  batch_linger_ms: 0,
  metadata_refresh_ms: 1000,
};
const auth = { patUsername: "", cacheTtlMs: 0 };

function sendReply(base: bigint): Uint8Array {
  const b = new Uint8Array(24);
  const v = new DataView(b.buffer);
  v.setUint32(0, 1, true);
  v.setBigUint64(16, base, true);
  return b;
}

function iggy(on: (req: SeenRequest) => Uint8Array[] | undefined = () => undefined): FakeServer {
  return new FakeServer((req) => {
    if (req.operation === 1) {
      return [replyFrame({ operation: 1, body: resultOk(registerPayload(0, 3n)) })];
    }
    return on(req) ?? [replyFrame({ operation: req.operation, body: sendReply(5n) })];
  });
}

const msg = (s: string) => ({
  payload: new TextEncoder().encode(s),
  headers: new Map<string, string>(),
});
const A = { stream: "s", topic: "t", partition: 0 };

Deno.test("IggyBackend.open() rejects as unavailable, naming the address, when nothing listens", async () => {
  const b = new IggyBackend(config, auth);
  await assert.rejects(b.open(), (e) =>
    e instanceof BackendError && e.code === "unavailable" &&
    /Iggy at 127\.0\.0\.1:1 unreachable: connection refused/.test(e.message));
  assert.equal(b.health().ready, false);
  assert.match(b.health().reason!, /connection refused/);
  await b.close();
});

Deno.test("IggyBackend.open() names both protocol windows when the server speaks neither", async () => {
  const s = new FakeServer(() => [evictionFrame(14, 0x4001, 0x4000)]);
  const b = new IggyBackend({ ...config, protocol: "auto" }, auth, { dial: s.dial });
  await assert.rejects(b.open(), /0\.16\.0\.\.0\.16\.1.*0\.11\.x.*0\.12\.2/s);
  await b.close();
});

Deno.test("IggyBackend.open() with iggy.protocol 0.11 refuses a 0.12 server and names the key", async () => {
  const s = new FakeServer(() => [evictionFrame(14, 0x3002, 0x3002)]);
  const b = new IggyBackend(config, auth, { dial: s.dial });
  await assert.rejects(b.open(), /0\.12\.2.*iggy\.protocol is "0\.11"/s);
  await b.close();
});

Deno.test("IggyBackend.open() reports bad service credentials in health()", async () => {
  const s = new FakeServer(() => [evictionFrame(9)]);
  const b = new IggyBackend(config, auth, { dial: s.dial });
  await assert.rejects(b.open(), BackendError);
  assert.equal(b.health().reason, "Iggy login failed: invalid credentials");
  await b.close();
});

Deno.test("IggyBackend.append() coalesces concurrent appends and gives each its offset", async () => {
  const s = iggy();
  const b = new IggyBackend(config, auth, { dial: s.dial });
  await b.open();
  assert.deepEqual(b.health(), {
    ready: true,
    detail: "Iggy server 0.9.0, binary protocol 0.11.0 (dialect 0.11, iggy.protocol 0.11)",
  });
  const [x, y] = await Promise.all([
    b.append({ ...A, messages: [msg("a"), msg("b")] }),
    b.append({ ...A, messages: [msg("c")] }),
  ]);
  assert.deepEqual([x.baseOffset, y.baseOffset], [5, 7]);
  const sends = s.seen.filter((r) => r.operation === 160);
  assert.equal(sends.length, 1);
  await b.close();
});

Deno.test("IggyBackend.append() rejects an empty payload as invalid without sending", async () => {
  const s = iggy();
  const b = new IggyBackend(config, auth, { dial: s.dial });
  await b.open();
  await assert.rejects(
    b.append({ ...A, messages: [msg("")] }),
    (e) => e instanceof BackendError && e.code === "invalid",
  );
  assert.equal(s.seen.filter((r) => r.operation === 160).length, 0);
  await b.close();
});

Deno.test("IggyBackend.append() that times out rejects with timeout and is not resent", async () => {
  const s = iggy((req) => (req.operation === 160 ? [] : undefined));
  const b = new IggyBackend(config, auth, { dial: s.dial });
  await b.open();
  await assert.rejects(
    b.append({ ...A, messages: [msg("a")] }),
    (e) => e instanceof BackendError && e.code === "timeout" && e.retryable,
  );
  assert.equal(s.seen.filter((r) => r.operation === 160).length, 1);
  await b.close();
});

Deno.test("IggyBackend.remote.watchSends() is told of each confirmed send, with its messages, and not of a failed one", async () => {
  let answer = true;
  const s = iggy((req) => (req.operation === 160 && !answer ? [] : undefined));
  const b = new IggyBackend(config, auth, { dial: s.dial });
  const seen: [number, number][] = [];
  b.remote.watchSends((seconds, messages) => seen.push([seconds, messages]));
  await b.open();
  await Promise.all([
    b.append({ ...A, messages: [msg("a"), msg("b")] }),
    b.append({ ...A, messages: [msg("c")] }),
  ]);
  await b.append({ ...A, messages: [msg("d")] });
  assert.deepEqual(seen.map(([, n]) => n), [3, 1]);
  for (const [seconds] of seen) assert.ok(seconds >= 0 && seconds < 5, `${seconds} s`);
  answer = false; // the next send times out: unconfirmed, so not a send time
  await assert.rejects(b.append({ ...A, messages: [msg("e")] }));
  assert.equal(seen.length, 2);
  await b.close();
});

Deno.test("IggyBackend maps status 3007 to not_found and an empty GET_TOPIC to null", async () => {
  const s = iggy((req) => {
    if (req.code === Code.POLL_MESSAGES) return [replyFrame({ operation: 2, status: 3007 })];
    if (req.code === Code.GET_TOPIC) return [replyFrame({ operation: 2 })];
    return undefined;
  });
  const b = new IggyBackend(config, auth, { dial: s.dial });
  await b.open();
  await assert.rejects(
    b.poll(A, 0, 10),
    (e) => e instanceof BackendError && e.code === "not_found",
  );
  assert.equal(await b.getTopic("s", "t"), null);
  await b.close();
});

Deno.test("IggyBackend.nextOffset() reads the partition's last offset + 1", async () => {
  const s = iggy((req) =>
    req.code === Code.GET_TOPIC
      ? [replyFrame({ operation: 2, body: topicBody("t", [[0, 0], [9, 10]]) })]
      : undefined
  );
  const b = new IggyBackend(config, auth, { dial: s.dial });
  await b.open();
  assert.equal(await b.nextOffset(A), 0);
  assert.equal(await b.nextOffset({ ...A, partition: 1 }), 10);
  await assert.rejects(
    b.nextOffset({ ...A, partition: 2 }),
    (e) => e instanceof BackendError && e.code === "not_found",
  );
  await b.close();
});

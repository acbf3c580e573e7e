import assert from "node:assert/strict";
import { DialectChooser } from "./dialect.ts";
import { ByteWriter } from "./bytes.ts";
import { Code } from "./codes.ts";
import { writeName } from "./encoding.ts";
import {
  evictionFrame,
  FakeServer,
  registerPayload,
  replyFrame,
  resultOk,
  type SeenRequest,
} from "../../../tests/helpers/fake_iggy/frames.ts";
import { loadHashes } from "../../base/xxhash.ts";
import { authFailure, nameWirePermissions, PrincipalAuthenticator } from "./principals.ts";
import { IggyEvictionError } from "./codes.ts";
import { streamBytes, topicHeaderBytes } from "../../../tests/helpers/fake_iggy/records.ts";
import type { WirePermissions } from "./v11/records.ts";

await loadHashes();

const F = false;
const T = true;
const wire: WirePermissions = {
  global: [F, F, F, F, F, F, F, F, F, T],
  streams: [
    { streamId: 7, flags: [F, T, F, F, F, F], topics: [{ topicId: 2, flags: [F, F, T, F] }] },
    { streamId: 9, flags: [T, F, F, F, F, F], topics: [] }, // deleted meanwhile
  ],
};

function catalog(code: number, body?: Uint8Array): Promise<Uint8Array> {
  if (code === Code.GET_STREAMS) {
    const w = new ByteWriter();
    streamBytes(w, 7, "plant");
    return Promise.resolve(w.finish().slice());
  }
  if (code === Code.GET_STREAM) {
    assert.deepEqual(body, new Uint8Array([1, 4, 7, 0, 0, 0]), "numeric stream id 7");
    const w = new ByteWriter();
    streamBytes(w, 7, "plant", 1);
    topicHeaderBytes(w, 2, "temps", 1);
    return Promise.resolve(w.finish().slice());
  }
  throw new Error(`unexpected ${code}`);
}

Deno.test("nameWirePermissions() keys streams and topics by name and drops unknown ids", async () => {
  const p = await nameWirePermissions(wire, catalog);
  assert.equal(p.global.send_messages, true);
  assert.equal(p.global.manage_servers, false);
  assert.deepEqual([...p.streams.keys()], ["plant"]);
  const s = p.streams.get("plant")!;
  assert.equal(s.read_stream, true);
  assert.deepEqual(s.topics.get("temps"), {
    manage_topic: false,
    read_topic: false,
    poll_messages: true,
    send_messages: false,
  });
});

Deno.test("authFailure() maps login evictions onto the port's reasons", () => {
  assert.deepEqual(authFailure(new IggyEvictionError(9, 0, 0)), {
    ok: false,
    reason: "bad_credentials",
  });
  assert.deepEqual(authFailure(new IggyEvictionError(10, 0, 0)), {
    ok: false,
    reason: "bad_credentials",
  });
  assert.deepEqual(authFailure(new IggyEvictionError(11, 0, 0)), { ok: false, reason: "inactive" });
  assert.deepEqual(authFailure(new IggyEvictionError(14, 0x3000, 0x3000)), {
    ok: false,
    reason: "unavailable",
  });
  assert.deepEqual(authFailure(new Error("refused")), { ok: false, reason: "unavailable" });
});

function userServer(password: string): FakeServer {
  return new FakeServer((req: SeenRequest) => {
    if (req.operation === 1) {
      const ok = new TextDecoder().decode(req.body).includes(password);
      return ok
        ? [replyFrame({ operation: 1, body: resultOk(registerPayload(3, 5n)) })]
        : [evictionFrame(9)];
    }
    if (req.code === Code.GET_USER) {
      const w = new ByteWriter().u32(3).u64(1).u8(1);
      writeName(w, "dev").u32(0).u32(0);
      return [replyFrame({ operation: 2, body: w.finish().slice() })];
    }
    return [];
  });
}

Deno.test("PrincipalAuthenticator logs in as the user, reads GET_USER and caches the success", async () => {
  const server = userServer("pw-ok");
  let now = 0;
  const auth = new PrincipalAuthenticator({
    connect: (c) =>
      new DialectChooser("0.11").connect(server.dial, c, { timeoutMs: 1000, label: "auth" }),
    patUsername: "",
    cacheTtlMs: 1000,
    service: () => undefined,
    now: () => now,
  });
  const r = await auth.authenticate("dev", "pw-ok");
  assert.ok(r.ok);
  assert.equal(r.principal.username, "dev");
  assert.equal(r.principal.permissions.streams.size, 0);
  await auth.authenticate("dev", "pw-ok");
  assert.equal(server.dials, 1, "second call served from cache");
  now = 2000;
  await auth.authenticate("dev", "pw-ok");
  assert.equal(server.dials, 2, "expired entry logs in again");
  assert.deepEqual(await auth.authenticate("dev", "wrong"), {
    ok: false,
    reason: "bad_credentials",
  });
  assert.equal(server.dials, 3);
});

Deno.test("PrincipalAuthenticator uses the PAT login when the username is pat_username", async () => {
  const server = userServer("tok");
  const auth = new PrincipalAuthenticator({
    connect: (c) =>
      new DialectChooser("0.11").connect(server.dial, c, { timeoutMs: 1000, label: "auth" }),
    patUsername: "token",
    cacheTtlMs: 0,
    service: () => undefined,
  });
  assert.ok((await auth.authenticate("token", "tok")).ok);
  const body = server.seen[0].body;
  assert.equal(body[body.length - 4 - 3 - 1], 3, "token length precedes the token");
});

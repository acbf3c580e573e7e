/**
 * The backend contract run against a real Iggy server (protocol 0.11.0 / server 0.9.0) when
 * `IGGY_TEST_ADDRESS` is set (`IGGY_TEST_USERNAME` / `IGGY_TEST_PASSWORD`, default iggy/iggy).
 * Without it, one ignored test says loudly that the suite was skipped: the Iggy backend is
 * only proven against a real server (DESIGN §1).
 *
 * Each case removes the `contract_*` streams it created (the server keeps data between runs).
 *
 * @module
 */
import { IggyBackend } from "../../src/log/iggy/mod.ts";
import { Code } from "../../src/log/iggy/codes.ts";
import { IggyConnection } from "../../src/log/iggy/v11/lockstep_connection.ts";
import { tcpDialer } from "../../src/log/iggy/dial.ts";
import { ByteWriter } from "../../src/log/iggy/bytes.ts";
import { readName, writeIdentifier, writeName } from "../../src/log/iggy/encoding.ts";
import { decodeStreamDetails, decodeStreams } from "../../src/log/iggy/v11/records.ts";
import { ByteReader } from "../../src/log/iggy/bytes.ts";
import { IggyEvictionError } from "../../src/log/iggy/codes.ts";
import { writeRequestHeader } from "../../src/log/iggy/header_layout.ts";
import { CLIENT_NAME, CLIENT_VERSION } from "../../src/log/iggy/version.ts";
import assert from "node:assert/strict";
import type { GatewayConfig } from "../../src/config/types.ts";
import { runBackendContract } from "./backend_contract.ts";

const address = Deno.env.get("IGGY_TEST_ADDRESS") ?? "";
const credentials = {
  username: Deno.env.get("IGGY_TEST_USERNAME") || "iggy",
  password: Deno.env.get("IGGY_TEST_PASSWORD") || "iggy",
};

function config(): GatewayConfig["iggy"] {
  return {
    address,
    protocol: (Deno.env.get("IGGY_TEST_PROTOCOL") ?? "auto") as "auto" | "0.11" | "0.12",
    username: credentials.username,
    password: credentials.password,
    token: "",
    tls: false,
    tls_ca_file: "",
    tls_server_name: "",
    request_timeout_ms: 10_000,
    pool_size: 2,
    heartbeat_interval_ms: 5_000,
    reconnect_max_ms: 2_000,
    batch_max_messages: 1000,
    batch_max_bytes: 1024 * 1024,
    batch_linger_ms: 0,
    metadata_refresh_ms: 5_000,
  };
}

/** Runs `fn` on a short-lived admin connection. */
async function withAdmin<T>(fn: (c: IggyConnection) => Promise<T>): Promise<T> {
  const dial = tcpDialer({
    address,
    tls: false,
    tlsCaFile: "",
    tlsServerName: "",
    connectTimeoutMs: 5_000,
  });
  const conn = new IggyConnection(await dial(), { timeoutMs: 10_000, label: "admin" });
  try {
    await conn.register({ kind: "password", ...credentials });
    return await fn(conn);
  } finally {
    await conn.close();
  }
}

async function contractStreams(c: IggyConnection): Promise<Set<string>> {
  const streams = decodeStreams(await c.request(Code.GET_STREAMS));
  return new Set(streams.map((s) => s.name).filter((n) => n.startsWith("contract_")));
}

if (address === "") {
  const why = "[iggy] contract suite SKIPPED: IGGY_TEST_ADDRESS is not set";
  console.warn(`${why} (set it, e.g. IGGY_TEST_ADDRESS=127.0.0.1:8090, to prove the Iggy backend)`);
  Deno.test({ name: why, ignore: true, fn() {} });
} else {
  runBackendContract("iggy", async () => {
    const before = await withAdmin(contractStreams);
    const backend = new IggyBackend(config(), { patUsername: "", cacheTtlMs: 0 });
    return {
      backend,
      cleanup: () =>
        withAdmin(async (c) => {
          for (const name of await contractStreams(c)) {
            if (before.has(name)) continue;
            await c.request(Code.DELETE_STREAM, writeIdentifier(new ByteWriter(), name).finish());
          }
        }),
    };
  }, { credentials });
  registerIggyExtras();
}

/** A stream "extra_<id>" with topic "t", created through the backend; returns ids and a cleanup. */
async function withStream(
  fn: (b: IggyBackend, ids: { stream: string; streamId: number; topicId: number }) => Promise<void>,
  patUsername = "",
): Promise<void> {
  const stream = `contract_extra_${crypto.randomUUID().slice(0, 8)}`;
  const b = new IggyBackend(config(), { patUsername, cacheTtlMs: 0 });
  await b.open();
  try {
    await b.createTopic(stream, "t", { partitions: 1 });
    const details = await withAdmin(async (c) =>
      decodeStreamDetails(
        await c.request(Code.GET_STREAM, writeIdentifier(new ByteWriter(), stream).finish()),
      )
    );
    await fn(b, { stream, streamId: details!.stream.id, topicId: details!.topics[0].id });
  } finally {
    await b.close();
    await withAdmin((c) =>
      c.request(Code.DELETE_STREAM, writeIdentifier(new ByteWriter(), stream).finish())
    );
  }
}

/** CREATE_USER body with one stream grant (poll) holding one topic grant (send). */
function createUserBody(
  name: string,
  password: string,
  status: number,
  streamId: number,
  topicId: number,
): Uint8Array {
  const p = new ByteWriter();
  for (let i = 0; i < 10; i++) p.u8(0); // no global rights
  p.u8(1).u32(streamId).u8(0).u8(0).u8(0).u8(0).u8(1).u8(0); // stream: poll_messages
  p.u8(1).u32(topicId).u8(0).u8(0).u8(0).u8(1).u8(0); // topic: send_messages, last topic
  p.u8(0); // last stream
  const perms = p.finish().slice();
  const w = new ByteWriter();
  writeName(w, name);
  w.u8(password.length).bytes(new TextEncoder().encode(password)).u8(status);
  return w.u8(1).u32(perms.length).bytes(perms).finish();
}

async function withUser(body: Uint8Array, name: string, fn: () => Promise<void>): Promise<void> {
  await withAdmin((c) => c.request(Code.CREATE_USER, body));
  try {
    await fn();
  } finally {
    await withAdmin((c) =>
      c.request(Code.DELETE_USER, writeIdentifier(new ByteWriter(), name).finish())
    );
  }
}

function registerIggyExtras(): void {
  Deno.test("[iggy] authenticate() names a restricted user's stream and topic grants", async () => {
    await withStream(async (b, ids) => {
      const name = `u_${crypto.randomUUID().slice(0, 8)}`;
      const body = createUserBody(name, "pw-123", 1, ids.streamId, ids.topicId);
      await withUser(body, name, async () => {
        const r = await b.authenticate(name, "pw-123");
        assert.ok(r.ok, JSON.stringify(r));
        const p = r.principal.permissions;
        assert.equal(p.global.send_messages, false);
        const s = p.streams.get(ids.stream);
        assert.ok(s, "stream grant keyed by name");
        assert.equal(s.poll_messages, true);
        assert.equal(s.topics.get("t")?.send_messages, true);
        assert.deepEqual(await b.authenticate(name, "pw-124"), {
          ok: false,
          reason: "bad_credentials",
        });
      });
    });
  });

  // Iggy answers a password login of an inactive user exactly like a wrong password, on
  // purpose (server/src/auth.rs: no probing for disabled accounts); only PAT logins say
  // "inactive".
  Deno.test("[iggy] authenticate() of an inactive Iggy user is bad_credentials", async () => {
    await withStream(async (b, ids) => {
      const name = `u_${crypto.randomUUID().slice(0, 8)}`;
      await withUser(
        createUserBody(name, "pw-123", 2, ids.streamId, ids.topicId),
        name,
        async () => {
          assert.deepEqual(await b.authenticate(name, "pw-123"), {
            ok: false,
            reason: "bad_credentials",
          });
        },
      );
    });
  });

  Deno.test("[iggy] authenticate() logs in with a personal access token as pat_username", async () => {
    const tokenName = `pat_${crypto.randomUUID().slice(0, 8)}`;
    const token = await withAdmin(async (c) => {
      const w = new ByteWriter();
      writeName(w, tokenName).u64(0);
      return readName(new ByteReader(await c.request(Code.CREATE_PAT, w.finish())));
    });
    try {
      await withStream(async (b) => {
        const r = await b.authenticate("token", token);
        assert.ok(r.ok, JSON.stringify(r));
        assert.equal(r.principal.username, credentials.username);
        assert.deepEqual(await b.authenticate("token", `${token}x`), {
          ok: false,
          reason: "bad_credentials",
        });
      }, "token");
    } finally {
      await withAdmin((c) =>
        c.request(Code.DELETE_PAT, writeName(new ByteWriter(), tokenName).finish())
      );
    }
  });

  Deno.test("[iggy] a Register with another protocol version is evicted with reason 14", async () => {
    const [hostname, port] = address.split(":");
    const conn = await Deno.connect({ hostname, port: Number(port) });
    try {
      const w = new ByteWriter().u32(0 << 20 | 12 << 10); // claim protocol 0.12.0
      writeName(w, CLIENT_NAME);
      writeName(w, CLIENT_VERSION);
      writeName(w, credentials.username).u8(credentials.password.length)
        .bytes(new TextEncoder().encode(credentials.password)).u32(0);
      const body = w.finish();
      const header = writeRequestHeader({
        bodyLength: body.length,
        client: 42n,
        request: 0n,
        operation: 1,
        session: 0n,
      });
      await conn.write(header);
      await conn.write(body);
      const frame = new Uint8Array(256);
      let got = 0;
      while (got < 256) {
        const n = await conn.read(frame.subarray(got));
        if (n === null) break;
        got += n;
      }
      assert.equal(frame[60], 13, "an eviction frame");
      const e = new IggyEvictionError(
        frame[255],
        new DataView(frame.buffer).getUint32(144, true),
        new DataView(frame.buffer).getUint32(148, true),
      );
      assert.equal(e.reason, 14);
      assert.match(e.message, /Iggy server speaks binary protocol 0\.11\.0/);
    } finally {
      conn.close();
    }
  });
}

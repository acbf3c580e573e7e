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
import { IggyConnection } from "../../src/log/iggy/connection.ts";
import { tcpDialer } from "../../src/log/iggy/dial.ts";
import { ByteWriter } from "../../src/log/iggy/bytes.ts";
import { writeIdentifier } from "../../src/log/iggy/encoding.ts";
import { decodeStreams } from "../../src/log/iggy/records.ts";
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
  }, { credentials, signalsAppends: false });
}

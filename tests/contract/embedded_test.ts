/**
 * The backend contract run against the embedded backend, each case on its own temp file.
 *
 * @module
 */
import { EmbeddedBackend } from "../../src/log/embedded/mod.ts";
import { ALL_GLOBAL_PERMISSIONS } from "../../src/access/permissions.ts";
import { hashPassword } from "../../src/access/password.ts";
import { runBackendContract } from "./backend_contract.ts";

const credentials = { username: "device", password: "s3cret-pass" };
// The lowest work factor the hash format accepts keeps the auth cases fast.
const passwordHash = await hashPassword(credentials.password, 1000);

runBackendContract("embedded", async () => {
  const dir = await Deno.makeTempDir({ prefix: "embedded_contract_" });
  const backend = new EmbeddedBackend({
    path: `${dir}/store.db`,
    users: [{
      username: credentials.username,
      passwordHash,
      permissions: { global: ALL_GLOBAL_PERMISSIONS, streams: new Map() },
    }],
    maxStoreBytes: 64 * 1024 * 1024,
    retentionMaxAgeSeconds: 0,
    retentionMaxTopicBytes: 0,
    retentionIntervalMs: 60_000,
    maxAppendBatch: 1000,
    writerThread: "worker", // the contract over the Worker path (the gateway default is in-process)
  });
  return {
    backend,
    cleanup: () => Deno.remove(dir, { recursive: true }),
  };
}, { credentials });

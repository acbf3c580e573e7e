/**
 * A real Iggy server for the tests that need one (`IGGY_TEST_SERVER_BIN`, an Iggy 0.9 binary):
 * started on a data directory and a TCP port of the test's, root `iggy`/`iggy`, TCP only.
 *
 * @module
 */
import { waitFor } from "./wait.ts";

/** Starts the server binary `bin` on `dataDir` and `127.0.0.1:port`. */
export function startIggyServer(bin: string, dataDir: string, port: number): Deno.ChildProcess {
  return new Deno.Command(bin, {
    cwd: dataDir,
    env: {
      IGGY_ROOT_USERNAME: "iggy",
      IGGY_ROOT_PASSWORD: "iggy",
      IGGY_SYSTEM_PATH: `${dataDir}/local_data`,
      IGGY_TCP_ADDRESS: `127.0.0.1:${port}`,
      IGGY_HTTP_ENABLED: "false",
      IGGY_QUIC_ENABLED: "false",
      IGGY_WEBSOCKET_ENABLED: "false",
      IGGY_SYSTEM_SHARDING_CPU_ALLOCATION: "1",
    },
    stdout: "null",
    stderr: "null",
  }).spawn();
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
export async function listening(port: number): Promise<boolean> {
  try {
    (await Deno.connect({ hostname: "127.0.0.1", port })).close();
    return true;
  } catch {
    return false;
  }
}

/** Waits (at most `timeoutMs`) until 127.0.0.1:`port` accepts connections. */
export function untilListening(port: number, what: string, timeoutMs = 30_000): Promise<void> {
  return waitFor(() => listening(port), timeoutMs, what);
}

import assert from "node:assert/strict";
import { IggyConnectionError } from "./codes.ts";
import { parseAddress, tcpDialer } from "./dial.ts";

Deno.test("parseAddress() splits host:port and [v6]:port, and refuses the rest", () => {
  assert.deepEqual(parseAddress("127.0.0.1:8090"), { hostname: "127.0.0.1", port: 8090 });
  assert.deepEqual(parseAddress("iggy.local:1"), { hostname: "iggy.local", port: 1 });
  assert.deepEqual(parseAddress("[::1]:8090"), { hostname: "::1", port: 8090 });
  for (const bad of ["", "host", "host:0", "host:70000", "::1:8090"]) {
    assert.throws(() => parseAddress(bad), IggyConnectionError, bad);
  }
});

Deno.test("tcpDialer() says 'connection refused' when nothing listens", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const dial = tcpDialer({
    address: `127.0.0.1:${port}`,
    tls: false,
    tlsCaFile: "",
    tlsServerName: "",
    connectTimeoutMs: 1000,
  });
  await assert.rejects(dial(), /Iggy at 127\.0\.0\.1:\d+ unreachable: connection refused/);
});

import assert from "node:assert/strict";
import { splitHostPort } from "./address.ts";

Deno.test("splitHostPort() splits host:port and [v6]:port, port unchecked", () => {
  assert.deepEqual(splitHostPort("127.0.0.1:8090"), { hostname: "127.0.0.1", port: 8090 });
  assert.deepEqual(splitHostPort("iggy.local:0"), { hostname: "iggy.local", port: 0 });
  assert.deepEqual(splitHostPort("[::1]:1883"), { hostname: "::1", port: 1883 });
  assert.deepEqual(splitHostPort("h:99999"), { hostname: "h", port: 99999 });
});

Deno.test("splitHostPort() returns null for any other shape", () => {
  for (const bad of ["", "host", "host:", ":1883", "::1:8090", "a b:1", "host:123456", "[::1]"]) {
    assert.equal(splitHostPort(bad), null, bad);
  }
});

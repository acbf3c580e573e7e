import assert from "node:assert/strict";
import { IpBlockSet } from "../base/ip.ts";
import { forwardedClient, MAX_FORWARDED_HOPS } from "./forwarded_for.ts";

const proxies = new IpBlockSet(["10.0.0.0/8", "fd00::/8"]);

Deno.test("forwardedClient() reads X-Forwarded-For from the right, past the trusted proxies", () => {
  const cases: [string | null, string, string][] = [
    ["198.51.100.7", "10.0.0.2", "198.51.100.7"],
    ["198.51.100.7, 10.0.0.9", "10.0.0.2", "198.51.100.7"],
    ["6.6.6.6, 198.51.100.7", "10.0.0.2", "198.51.100.7"], // the left end is the client's to forge
    ["10.0.0.8, 10.0.0.9", "10.0.0.2", "10.0.0.8"], // all proxies: the leftmost
    [" 2001:DB8::1 ,fd00::3", "10.0.0.2", "2001:db8::1"],
    ["[2001:db8::1]", "10.0.0.2", "2001:db8::1"],
    ["::ffff:198.51.100.7", "10.0.0.2", "198.51.100.7"],
    [null, "10.0.0.2", "10.0.0.2"], // the proxy's own request
    ["198.51.100.7", "192.0.2.1", "192.0.2.1"], // an untrusted peer's header is not taken
    ["junk", "192.0.2.1", "192.0.2.1"],
  ];
  for (const [header, peer, address] of cases) {
    assert.deepEqual(forwardedClient(header, peer, proxies), { address }, String(header));
  }
});

Deno.test("forwardedClient() refuses a trusted proxy's header with a non-IP or too many hops", () => {
  for (const header of ["unknown", "198.51.100.7:5000", "198.51.100.7,", "", "_hidden"]) {
    const got = forwardedClient(header, "10.0.0.2", proxies);
    assert.ok("refused" in got, header);
  }
  const chain = Array(MAX_FORWARDED_HOPS + 1).fill("10.0.0.1").join(",");
  assert.deepEqual(forwardedClient(chain, "10.0.0.2", proxies), {
    refused: `X-Forwarded-For of 33 addresses, over 32`,
  });
  const longest = Array(MAX_FORWARDED_HOPS).fill("10.0.0.1").join(",");
  assert.deepEqual(forwardedClient(longest, "10.0.0.2", proxies), { address: "10.0.0.1" });
});

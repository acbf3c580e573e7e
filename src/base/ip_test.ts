import assert from "node:assert/strict";
import { formatIp, IpBlockSet, parseIp } from "./ip.ts";

Deno.test("parseIp() and formatIp(): IPv4, IPv6 (RFC 5952 form), IPv4-mapped as IPv4", () => {
  const cases: [string, string][] = [
    ["10.0.0.1", "10.0.0.1"],
    ["::1", "::1"],
    ["2001:DB8:0:0:0:0:0:42", "2001:db8::42"],
    ["::ffff:10.0.0.1", "10.0.0.1"],
    ["::ffff:a00:1", "10.0.0.1"],
    ["fe80::1:0:0:1", "fe80::1:0:0:1"],
  ];
  for (const [text, formatted] of cases) assert.equal(formatIp(parseIp(text)!), formatted, text);
  for (
    const bad of [
      "256.0.0.1",
      "1.2.3",
      "1:2:3",
      ":1:2:3:4:5:6:7",
      "1::2::3",
      "x::1",
      "ffff:1.2.3.4",
      "",
    ]
  ) {
    assert.equal(parseIp(bad), null, bad);
  }
});

Deno.test("IpBlockSet.has() matches CIDR blocks and single addresses, IPv4 also when mapped", () => {
  const set = new IpBlockSet(["10.0.0.0/8", "192.168.1.7", "fd00::/8", "172.16.0.0/12"]);
  for (const yes of ["10.1.2.3", "::ffff:10.9.9.9", "192.168.1.7", "fd12::1", "172.31.255.255"]) {
    assert.ok(set.has(yes), yes);
  }
  for (const no of ["11.0.0.1", "192.168.1.8", "fe00::1", "172.32.0.0", "localhost", ""]) {
    assert.ok(!set.has(no), no);
  }
  assert.ok(new IpBlockSet(["0.0.0.0/0"]).has("203.0.113.1"));
  assert.ok(!new IpBlockSet([]).has("127.0.0.1"));
});

Deno.test("IpBlockSet refuses an entry that is no IP or block, naming it", () => {
  for (const bad of ["10.0.0.0/33", "::/129", "example.com", "10.0.0.0/", "10.0.0.0/8/8"]) {
    assert.throws(() => new IpBlockSet([bad]), new RegExp(`"${bad}" is not an IP address`));
  }
});

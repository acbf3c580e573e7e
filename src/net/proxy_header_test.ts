import assert from "node:assert/strict";
import {
  looksLikeProxyHeader,
  MAX_V1_HEADER_BYTES,
  MAX_V2_HEADER_BYTES,
  parseProxyHeader,
  type ProxyParse,
} from "./proxy_header.ts";

const text = (s: string) => new TextEncoder().encode(s);
const SIG = [0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a];

/** A v2 header: command byte, family byte, then `body` (address block and TLVs). */
function v2(verCmd: number, fam: number, body: number[], length = body.length): Uint8Array {
  return Uint8Array.from([...SIG, verCmd, fam, length >> 8, length & 0xff, ...body]);
}
const V4_BLOCK = [203, 0, 113, 7, 10, 0, 0, 5, 0xc3, 0x50, 0x07, 0x5b];
const V6_BLOCK = [
  ...[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x42],
  ...Array(15).fill(0),
  1,
  ...[0xc3, 0x50, 0x07, 0x5b],
];

function header(source: string | null, version: 1 | 2, length: number): ProxyParse {
  return { kind: "header", version, length, source };
}

Deno.test("parseProxyHeader() reads v1 TCP4, TCP6 and UNKNOWN lines and where they end", () => {
  const cases: [string, string | null][] = [
    ["PROXY TCP4 203.0.113.7 10.0.0.5 50000 1883\r\n", "203.0.113.7"],
    ["PROXY TCP4 0.0.0.0 255.255.255.255 0 65535\r\n", "0.0.0.0"],
    ["PROXY TCP6 2001:db8::42 ::1 50000 1883\r\n", "2001:db8::42"],
    ["PROXY TCP6 2001:DB8:0:0:0:0:0:42 ::1 1 2\r\n", "2001:db8::42"],
    // An IPv4 client of a dual-stack balancer has the same name as when it connects directly.
    ["PROXY TCP6 ::ffff:203.0.113.7 ::1 1 2\r\n", "203.0.113.7"],
    ["PROXY UNKNOWN\r\n", null],
    ["PROXY UNKNOWN ffff::1 ffff::2 65535 65535\r\n", null],
  ];
  for (const [line, source] of cases) {
    const expected = header(source, 1, line.length);
    assert.deepEqual(parseProxyHeader(text(line)), expected, line);
    // What follows the header is not the parser's: the same answer with MQTT bytes after it.
    const withConnect = Uint8Array.from([...text(line), 0x10, 0x0c, 0x00, 0x04]);
    assert.deepEqual(parseProxyHeader(withConnect), expected, line);
  }
});

Deno.test("parseProxyHeader() refuses every v1 line that does not match the protocol exactly", () => {
  const refused = [
    "PROXY TCP4 203.0.113.7 10.0.0.5 50000 1883\n", // LF alone
    "PROXY TCP4 203.0.113.7 10.0.0.5 50000 1883\rX", // CR alone
    "PROXY TCP4 203.0.113.7  10.0.0.5 50000 1883\r\n", // two spaces
    "PROXY TCP4 203.0.113.7 10.0.0.5 50000\r\n", // a field short
    "PROXY TCP4 203.0.113.7 10.0.0.5 50000 1883 7\r\n", // a field over
    "PROXY TCP4 203.000.113.7 10.0.0.5 1 2\r\n", // heading zeroes
    "PROXY TCP4 256.0.113.7 10.0.0.5 1 2\r\n",
    "PROXY TCP4 2001:db8::42 10.0.0.5 1 2\r\n", // family mismatch
    "PROXY TCP6 203.0.113.7 ::1 1 2\r\n",
    "PROXY TCP6 2001:db8:::42 ::1 1 2\r\n",
    "PROXY TCP4 203.0.113.7 10.0.0.5 01 2\r\n",
    "PROXY TCP4 203.0.113.7 10.0.0.5 1 65536\r\n",
    "PROXY TCP4 203.0.113.7 10.0.0.5 -1 2\r\n",
    "PROXY UDP4 203.0.113.7 10.0.0.5 1 2\r\n",
    "PROXY tcp4 203.0.113.7 10.0.0.5 1 2\r\n",
    "PROXY TCP4 203.0.113.7 10.0.0.5 1 2\x00\r\n",
    "GET / HTTP/1.1\r\n", // not a header at all
    "\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c", // a CONNECT without its header
  ];
  for (const line of refused) {
    const got = parseProxyHeader(text(line));
    assert.equal(got.kind, "bad", JSON.stringify(line));
  }
});

Deno.test("parseProxyHeader() waits for a v1 line's CRLF up to 107 bytes, then refuses it", () => {
  const line = "PROXY TCP4 203.0.113.7 10.0.0.5 50000 1883\r\n";
  for (let n = 1; n < line.length - 1; n++) {
    assert.deepEqual(parseProxyHeader(text(line.slice(0, n))), { kind: "more" }, `${n} bytes`);
  }
  const long = "PROXY UNKNOWN " + "f".repeat(MAX_V1_HEADER_BYTES);
  assert.deepEqual(parseProxyHeader(text(long.slice(0, MAX_V1_HEADER_BYTES - 1))), {
    kind: "more",
  });
  const got = parseProxyHeader(text(long.slice(0, MAX_V1_HEADER_BYTES)));
  assert.equal(got.kind, "bad");
  assert.match((got as { reason: string }).reason, /no CRLF in the first 107 bytes/);
  // The longest valid line is exactly 107 bytes.
  const longest = `PROXY UNKNOWN ${"ffff:".repeat(7)}ffff ${"ffff:".repeat(7)}ffff 65535 65535\r\n`;
  assert.equal(longest.length, MAX_V1_HEADER_BYTES);
  assert.deepEqual(parseProxyHeader(text(longest)), header(null, 1, 107));
});

Deno.test("parseProxyHeader() reads v2 PROXY over TCP/IPv4 and TCP/IPv6, TLVs skipped", () => {
  assert.deepEqual(parseProxyHeader(v2(0x21, 0x11, V4_BLOCK)), header("203.0.113.7", 2, 28));
  assert.deepEqual(parseProxyHeader(v2(0x21, 0x21, V6_BLOCK)), header("2001:db8::42", 2, 52));
  // ALPN "mqtt" and a unique id after the address block: part of the header, ignored.
  const tlvs = [0x01, 0, 4, ...text("mqtt"), 0x05, 0, 3, 1, 2, 3];
  const withTlvs = v2(0x21, 0x11, [...V4_BLOCK, ...tlvs]);
  assert.deepEqual(parseProxyHeader(withTlvs), header("203.0.113.7", 2, 16 + 12 + 13));
});

Deno.test("parseProxyHeader() takes the real endpoint for v2 LOCAL, UNSPEC, UNIX and datagrams", () => {
  // LOCAL (a balancer's health check): addresses ignored, and its length is still skipped.
  assert.deepEqual(parseProxyHeader(v2(0x20, 0x00, [])), header(null, 2, 16));
  assert.deepEqual(parseProxyHeader(v2(0x20, 0x11, V4_BLOCK)), header(null, 2, 28));
  assert.deepEqual(parseProxyHeader(v2(0x20, 0x00, [1, 2, 3])), header(null, 2, 19));
  // PROXY with AF_UNSPEC, AF_UNIX (two 108-byte paths) or UDP: accepted, as UNSPEC.
  assert.deepEqual(parseProxyHeader(v2(0x21, 0x00, [])), header(null, 2, 16));
  assert.deepEqual(parseProxyHeader(v2(0x21, 0x31, Array(216).fill(0x61))), header(null, 2, 232));
  assert.deepEqual(parseProxyHeader(v2(0x21, 0x32, Array(216).fill(0x61))), header(null, 2, 232));
  assert.deepEqual(parseProxyHeader(v2(0x21, 0x12, V4_BLOCK)), header(null, 2, 28));
});

Deno.test("parseProxyHeader() refuses v2 headers that break the protocol", () => {
  const refused: [string, Uint8Array][] = [
    ["version 1", v2(0x11, 0x11, V4_BLOCK)],
    ["version 3", v2(0x31, 0x11, V4_BLOCK)],
    ["command 2", v2(0x22, 0x11, V4_BLOCK)],
    ["command 15", v2(0x2f, 0x11, V4_BLOCK)],
    ["family 4", v2(0x21, 0x41, V4_BLOCK)],
    ["transport 3", v2(0x21, 0x13, V4_BLOCK)],
    ["IPv4 block short", v2(0x21, 0x11, V4_BLOCK.slice(0, 11))],
    ["IPv6 block short", v2(0x21, 0x21, V4_BLOCK)],
    ["UNIX block short", v2(0x21, 0x31, Array(215).fill(0))],
  ];
  for (const [what, bytes] of refused) assert.equal(parseProxyHeader(bytes).kind, "bad", what);
  // A signature that goes wrong at any byte is not a v2 header.
  for (let i = 0; i < SIG.length; i++) {
    const bytes = v2(0x21, 0x11, V4_BLOCK);
    bytes[i] ^= 0x20;
    assert.equal(parseProxyHeader(bytes).kind, "bad", `signature byte ${i}`);
  }
});

Deno.test("parseProxyHeader() refuses a v2 header over 4096 bytes from its first 16", () => {
  const fits = v2(0x21, 0x11, [...V4_BLOCK, 0x04, 0x0f, 0xe1, ...Array(4065).fill(0)]);
  assert.equal(fits.length, MAX_V2_HEADER_BYTES);
  assert.deepEqual(parseProxyHeader(fits), header("203.0.113.7", 2, MAX_V2_HEADER_BYTES));
  // Only the 16 fixed bytes of a 65,551-byte header have come: refused, not waited for.
  const first16 = v2(0x21, 0x11, [], 65535);
  const got = parseProxyHeader(first16);
  assert.equal(got.kind, "bad");
  assert.match((got as { reason: string }).reason, /65551 bytes, over 4096/);
});

Deno.test("parseProxyHeader() waits for the whole v2 header, byte by byte", () => {
  const bytes = v2(0x21, 0x21, V6_BLOCK);
  for (let n = 1; n < bytes.length; n++) {
    assert.deepEqual(parseProxyHeader(bytes.subarray(0, n)), { kind: "more" }, `${n} bytes`);
  }
});

Deno.test("looksLikeProxyHeader() knows both signatures from their first byte, not MQTT", () => {
  assert.ok(looksLikeProxyHeader(text("P")));
  assert.ok(looksLikeProxyHeader(text("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n")));
  assert.ok(looksLikeProxyHeader(Uint8Array.of(0x0d)));
  assert.ok(looksLikeProxyHeader(v2(0x21, 0x11, V4_BLOCK)));
  assert.ok(!looksLikeProxyHeader(Uint8Array.of(0x10, 0x0c))); // CONNECT
  assert.ok(!looksLikeProxyHeader(Uint8Array.of(0x16, 0x03, 0x01))); // a TLS ClientHello
  assert.ok(!looksLikeProxyHeader(text("PRIVATE")));
  assert.ok(!looksLikeProxyHeader(new Uint8Array(0)));
});

/** A seeded generator (mulberry32): the same cases on every run. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

Deno.test("parseProxyHeader() on 20,000 mutated headers: never throws, a verdict within its bounds", () => {
  const seeds = [
    text("PROXY TCP4 203.0.113.7 10.0.0.5 50000 1883\r\n\x10\x0c"),
    text("PROXY TCP6 2001:db8::42 ::1 50000 1883\r\n"),
    text("PROXY UNKNOWN\r\n"),
    v2(0x21, 0x11, V4_BLOCK),
    v2(0x21, 0x21, [...V6_BLOCK, 0x01, 0, 4, ...text("mqtt")]),
    v2(0x20, 0x00, []),
  ];
  const random = rng(54);
  const int = (n: number) => Math.floor(random() * n);
  for (let i = 0; i < 20_000; i++) {
    const bytes = Array.from(seeds[int(seeds.length)]);
    for (let m = 1 + int(4); m > 0; m--) {
      const at = int(bytes.length + 1);
      const op = int(4);
      if (op === 0) bytes[at] = int(256);
      else if (op === 1) bytes.splice(at, 0, int(256));
      else if (op === 2) bytes.splice(at, 1);
      else bytes.length = Math.min(bytes.length, at);
    }
    const input = Uint8Array.from(bytes);
    const got = parseProxyHeader(input);
    if (got.kind === "header") {
      assert.ok(got.length <= input.length, "a header ends inside what was read");
      assert.ok(got.length <= (got.version === 1 ? MAX_V1_HEADER_BYTES : MAX_V2_HEADER_BYTES));
      // Any part of it, cut anywhere, waits for the rest.
      assert.equal(parseProxyHeader(input.subarray(0, int(got.length))).kind, "more");
    } else if (got.kind === "more") {
      assert.ok(input.length < MAX_V2_HEADER_BYTES);
    }
  }
});

import assert from "node:assert/strict";
import { OperatorError } from "../config/errors.ts";
import { bindError, formatAddress } from "./bind_error.ts";

/** A node:net error as Deno's node:net raises it: a plain Error with a `code`. */
function nodeError(code: string): Error {
  return Object.assign(new Error(`listen ${code}`), { code });
}

const CASES: [string, unknown, string, string][] = [
  ["Deno AddrInUse", new Deno.errors.AddrInUse("x"), "address_in_use", "address already in use"],
  ["node EADDRINUSE", nodeError("EADDRINUSE"), "address_in_use", "address already in use"],
  [
    "Deno PermissionDenied",
    new Deno.errors.PermissionDenied("x"),
    "permission_denied",
    "permission denied",
  ],
  ["node EACCES", nodeError("EACCES"), "permission_denied", "permission denied"],
  [
    "Deno AddrNotAvailable",
    new Deno.errors.AddrNotAvailable("x"),
    "address_not_available",
    "address not available",
  ],
  ["node EINVAL", nodeError("EINVAL"), "address_not_available", "address not available"],
];
for (const [what, err, code, reason] of CASES) {
  Deno.test(`bindError() names listener and address for ${what}`, () => {
    const e = bindError("HTTP listener", "127.0.0.1", 8080, err);
    assert.ok(e instanceof OperatorError);
    assert.equal(e.code, code);
    assert.equal(e.message, `HTTP listener 127.0.0.1:8080: ${reason}`);
  });
}

Deno.test("bindError() returns any other error unchanged (a bug keeps its stack)", () => {
  const bug = new TypeError("oops");
  assert.equal(bindError("MQTT listener", "0.0.0.0", 1883, bug), bug);
});

Deno.test("formatAddress() brackets an IPv6 host", () => {
  assert.equal(formatAddress("::", 1883), "[::]:1883");
  assert.equal(formatAddress("0.0.0.0", 1883), "0.0.0.0:1883");
});

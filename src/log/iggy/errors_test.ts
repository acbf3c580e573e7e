/** `loginRefusalOf()`: which login refusal an error of `IggyBackend.open()` carries, for `check`. */
import assert from "node:assert/strict";
import {
  IggyConnectionError,
  IggyError,
  IggyEvictionError,
  IggyTimeoutError,
  Status,
} from "./codes.ts";
import { loginRefusalOf, toBackendError } from "./errors.ts";

const CASES: [string, unknown, ReturnType<typeof loginRefusalOf>][] = [
  ["eviction 9 (0.12: invalid credentials)", new IggyEvictionError(9, 0, 0), "credentials"],
  [
    "status 42 (invalid credentials)",
    new IggyError(Status.INVALID_CREDENTIALS, "x"),
    "credentials",
  ],
  ["status 44 (invalid password)", new IggyError(44, "x"), "credentials"],
  ["status 54 (token expired)", new IggyError(54, "x"), "token"],
  ["eviction 10 (invalid token)", new IggyEvictionError(10, 0, 0), "token"],
  ["eviction 11 (user inactive)", new IggyEvictionError(11, 0, 0), "user_inactive"],
  ["eviction 14 (protocol)", new IggyEvictionError(14, 0x3002, 0x3000), "protocol"],
  ["connection refused", new IggyConnectionError("Iggy at a:1 unreachable"), null],
  ["no reply in time", new IggyTimeoutError("no reply"), null],
  ["unauthorized (not a login)", new IggyError(Status.UNAUTHORIZED, "x"), null],
  ["not an error", "text", null],
];

for (const [what, e, want] of CASES) {
  Deno.test(`loginRefusalOf() reads ${what} as ${want}, also wrapped by open()`, () => {
    assert.equal(loginRefusalOf(e), want);
    assert.equal(loginRefusalOf(toBackendError(e, "connect to Iggy at a:1")), want);
  });
}

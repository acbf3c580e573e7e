import assert from "node:assert/strict";
import { OperatorError } from "./errors.ts";
import { fileAccessError, readOperatorFile } from "./files.ts";
import { notCapableMessage, READABLE_PLACES, WRITABLE_PLACES } from "./permission_set.ts";
import denoJson from "../../deno.json" with { type: "json" };

const ERRORS: [string, Error, string, string][] = [
  [
    "NotFound",
    new Deno.errors.NotFound("x"),
    "not_found",
    'Cannot read topic map "m.toml": not found',
  ],
  [
    "PermissionDenied",
    new Deno.errors.PermissionDenied("x"),
    "permission_denied",
    'Cannot read topic map "m.toml": permission denied',
  ],
  [
    "IsADirectory",
    new Deno.errors.IsADirectory("x"),
    "invalid_file",
    'Cannot read topic map "m.toml": is a directory',
  ],
  [
    "NotCapable",
    new Deno.errors.NotCapable("x"),
    "not_capable",
    notCapableMessage("read", "topic map", "m.toml"),
  ],
];
for (const [name, err, code, message] of ERRORS) {
  Deno.test(`fileAccessError() turns ${name} into one line naming role and path`, () => {
    const e = fileAccessError(err, "read", "topic map", "m.toml");
    assert.ok(e instanceof OperatorError);
    assert.equal(e.code, code);
    assert.equal(e.message, message);
    assert.equal(e.cause, err);
  });
}

Deno.test("fileAccessError() finds the OS error inside a cause chain (a BackendError's)", () => {
  const inner = new Deno.errors.NotCapable("Requires write access");
  const outer = new Error("Cannot open embedded store", { cause: inner });
  const e = fileAccessError(outer, "write", "embedded store", "/tmp/x.db");
  assert.equal(e?.code, "not_capable");
  assert.match(
    e!.message,
    /^Cannot write embedded store "\/tmp\/x.db": the gateway may write only/,
  );
});

Deno.test("fileAccessError() returns null for an error that is not the operator's", () => {
  assert.equal(fileAccessError(new TypeError("bug"), "read", "topic map", "m"), null);
  assert.equal(fileAccessError("not an error", "read", "topic map", "m"), null);
});

Deno.test("readOperatorFile() rejects a missing file with one line", async () => {
  await assert.rejects(
    readOperatorFile("topic map", "/nonexistent/iggy-mqtt-map.toml"),
    (e: unknown) => e instanceof OperatorError && e.code === "not_found",
  );
});

Deno.test("the permission-set places come from deno.json's set \"gateway\", minus the code's own", () => {
  const set = denoJson.permissions.gateway;
  assert.ok(set.read.includes("./src"));
  assert.deepEqual(READABLE_PLACES, set.read.filter((p) => !p.startsWith("./src")));
  assert.deepEqual(WRITABLE_PLACES, set.write);
  assert.ok(
    READABLE_PLACES.includes("./config") && READABLE_PLACES.includes("/etc/iggy-mqtt-gateway"),
  );
  assert.equal(
    notCapableMessage("write", "embedded store", "/tmp/x.db"),
    `Cannot write embedded store "/tmp/x.db": the gateway may write only ${
      set.write.join(", ")
    } (permission set "gateway" in deno.json); put the file there`,
  );
});

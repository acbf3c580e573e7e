import assert from "node:assert/strict";
import { directoryOf, replaceFileDurably, syncDirectory } from "./durable_file.ts";

Deno.test("replaceFileDurably() writes a new file, then replaces it whole, leaving no temporary file", async () => {
  const dir = await Deno.makeTempDir({ prefix: "durable_file_" });
  try {
    const path = `${dir}/ledger.json`;
    await replaceFileDurably(path, "first\n");
    assert.equal(await Deno.readTextFile(path), "first\n");
    await replaceFileDurably(path, "x".repeat(100_000));
    assert.equal(await Deno.readTextFile(path), "x".repeat(100_000));
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["ledger.json"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("replaceFileDurably() into a missing directory rejects and creates nothing", async () => {
  const dir = await Deno.makeTempDir({ prefix: "durable_file_" });
  try {
    await assert.rejects(
      replaceFileDurably(`${dir}/missing/ledger.json`, "{}"),
      Deno.errors.NotFound,
    );
    await assert.rejects(syncDirectory(`${dir}/missing`), Deno.errors.NotFound);
    assert.deepEqual([...Deno.readDirSync(dir)], []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("directoryOf() names the directory holding a path", () => {
  assert.equal(directoryOf("data/gateway.db"), "data");
  assert.equal(directoryOf("/var/lib/gw/gateway.db"), "/var/lib/gw");
  assert.equal(directoryOf("/gateway.db"), "/");
  assert.equal(directoryOf("gateway.db"), ".");
  assert.equal(directoryOf("data/store/"), "data");
});

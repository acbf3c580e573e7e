/**
 * docs/OPERATIONS.md "RAM and disk sizing": the worked example's check command, run verbatim
 * (`bash -c "<the line>"`) in the repository root as an operator pastes it from a clone: the
 * sizes it sets load and `check` passes, printing the disk's free space against the reserve.
 *
 * @module
 */
import assert from "node:assert/strict";
import { ROOT } from "../helpers/cli.ts";
import { run } from "../helpers/gateway.ts";

const DOC = await Deno.readTextFile(`${ROOT}docs/OPERATIONS.md`);
const HEADING = "## RAM and disk sizing";

Deno.test("the sizing example's check command of OPERATIONS runs verbatim and passes", async () => {
  const start = DOC.indexOf(HEADING);
  assert.ok(start >= 0, `${HEADING} in docs/OPERATIONS.md`);
  const rest = DOC.slice(start + HEADING.length);
  const section = rest.slice(0, rest.search(/\n## /));
  const blocks = [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1].trim());
  assert.equal(blocks.length, 1);
  assert.match(blocks[0], /^IGGY_MQTT_EMBEDDED_MAX_STORE_BYTES=9663676416 /);
  const r = await run("bash", ["-c", blocks[0]], { cwd: ROOT, timeoutMs: 120_000 });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^OK: config\/topic-map\.toml: \d+ rule\(s\)/m);
  assert.match(
    r.stdout,
    /^embedded\.path "data\/gateway\.db": the disk holding ".*" has \d+ bytes free/m,
  );
  // The worked example's arithmetic, as the text states it.
  assert.equal(9 * 1024 ** 3, 9663676416);
  assert.equal(650 * 1024 ** 2, 681574400);
  assert.ok(650 * 14 <= 9 * 1024, "14 topics at 650 MiB fit in 9 GiB");
});

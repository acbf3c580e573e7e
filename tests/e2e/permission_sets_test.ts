/**
 * deno.json's permission sets: `gateway` (deno task start, deno task compile, the systemd unit's
 * binary) grants no FFI, so Deno's other permissions bound what the process can touch;
 * `gateway-epoll` is the same set plus FFI, for the epoll socket layer, and nothing else.
 */
import assert from "node:assert/strict";
import { ownStderrLines, ROOT } from "../helpers/cli.ts";

const DENO = Deno.execPath();
const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`));

async function probeUnder(set: string): Promise<string> {
  const r = await new Deno.Command(DENO, {
    args: ["run", `-P=${set}`, "--no-prompt", "tests/fixtures/dlopen_probe.ts"],
    cwd: ROOT,
    stdin: "null",
  }).output();
  const stderr = ownStderrLines(new TextDecoder().decode(r.stderr));
  assert.equal(r.code, 0, stderr.join("\n"));
  return new TextDecoder().decode(r.stdout).trim();
}

Deno.test("the strict set `gateway` refuses Deno.dlopen; `gateway-epoll` allows it", async () => {
  assert.equal(await probeUnder("gateway"), "NotCapable");
  if (Deno.build.os === "linux") assert.equal(await probeUnder("gateway-epoll"), "opened");
});

Deno.test("`gateway-epoll` is `gateway` plus FFI, nothing more", () => {
  const { gateway, "gateway-epoll": epoll } = config.permissions;
  assert.equal(gateway.ffi, undefined, "the strict set names no FFI");
  assert.deepEqual(epoll, { ...gateway, ffi: true });
});

Deno.test("deno task start runs the strict set; start:epoll and the epoll builds the other", () => {
  const words = (task: string) => String(config.tasks[task]).split(/\s+/);
  for (const task of ["start", "check", "read", "explain", "compile", "compile:arm64"]) {
    assert.ok(words(task).includes("-P=gateway"), `${task}: ${config.tasks[task]}`);
  }
  for (const task of ["start:epoll", "compile:epoll", "compile:epoll:arm64"]) {
    assert.ok(words(task).includes("-P=gateway-epoll"), `${task}: ${config.tasks[task]}`);
  }
});

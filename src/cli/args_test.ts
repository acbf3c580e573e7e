import assert from "node:assert/strict";
import { parseCommandArgs, UsageError } from "./args.ts";
import { commandSpec } from "./commands.ts";

const spec = (name: string) => commandSpec(name)!;

Deno.test("parseCommandArgs() reads strings, integers, flags and positionals", () => {
  const a = parseCommandArgs(spec("read"), [
    "--stream",
    "s",
    "--topic=t",
    "--partition",
    "2",
    "--count=5",
    "--json",
  ]);
  assert.equal(a.help, false);
  assert.equal(a.string("stream"), "s");
  assert.equal(a.string("topic"), "t");
  assert.equal(a.integer("partition"), 2);
  assert.equal(a.integer("from"), undefined);
  assert.equal(a.integer("count"), 5);
  assert.equal(a.flag("json"), true);
  const e = parseCommandArgs(spec("explain"), ["--json", "a/b", "--", "--not-an-option"]);
  assert.deepEqual(e.positionals, ["a/b", "--not-an-option"]);
});

Deno.test("parseCommandArgs() returns help for --help or -h, whatever else is on the line", () => {
  for (const args of [["--help"], ["-h"], ["--bogus", "--help"], ["--count", "abc", "-h"]]) {
    assert.equal(parseCommandArgs(spec("read"), args).help, true, args.join(" "));
  }
  assert.equal(parseCommandArgs(spec("explain"), ["--", "-h"]).help, false);
});

const REFUSED: [string, string[], RegExp][] = [
  ["check", ["--bogus"], /^check: unknown option "--bogus"$/],
  ["check", ["--bogus=1"], /^check: unknown option "--bogus"$/],
  ["check", ["-x"], /^check: unknown option "-x"$/],
  ["run", ["--map", "m.toml"], /^run: unknown option "--map"$/],
  ["hash-password", ["--config", "c.toml"], /^hash-password: unknown option "--config"$/],
  ["check", ["extra"], /^check: unexpected argument "extra"$/],
  ["check", ["--config"], /^check: --config needs a value \(FILE\)$/],
  ["check", ["--config", "--map", "m"], /^check: --config needs a value/],
  ["check", ["--config="], /^check: --config must not be empty$/],
  ["check", ["--config", "a", "--map", "b"], /--config and --map cannot be given together/],
  ["check", ["--offline=yes"], /^check: --offline takes no value$/],
  ["check", ["--config", "a", "--config", "b"], /--config is given twice/],
  ["explain", [], /^explain: at least one TOPIC is required$/],
  ["explain", ["--json=yes", "t"], /--json takes no value/],
  ["read", ["--topic", "t"], /^read: --stream is required$/],
  ["read", ["--stream", "s"], /^read: --topic is required$/],
  [
    "read",
    ["--stream", "s", "--topic", "t", "--count", "abc"],
    /--count must be a positive integer, got "abc"/,
  ],
  ["read", ["--stream", "s", "--topic", "t", "--count", "0"], /--count must be a positive/],
  [
    "read",
    ["--stream", "s", "--topic", "t", "--partition", "-1"],
    /--partition must be a non-negative integer, got "-1"/,
  ],
  ["read", ["--stream", "s", "--topic", "t", "--partition", "1.5"], /--partition must be/],
  ["read", ["--stream", "s", "--topic", "t", "--from", "1e3"], /--from must be/],
  ["read", ["--stream", "s", "--topic", "t", "--from", "99999999999999999999"], /--from must be/],
];
for (const [command, args, want] of REFUSED) {
  Deno.test(`parseCommandArgs() refuses "${command} ${args.join(" ")}" naming the option`, () => {
    assert.throws(() => parseCommandArgs(spec(command), args), (e: unknown) => {
      assert.ok(e instanceof UsageError);
      assert.equal(e.spec.name, command);
      assert.match(e.message, want);
      assert.ok(!e.message.includes("\n"), "one line");
      return true;
    });
  });
}

Deno.test("ParsedArgs refuses to read an option its command does not declare (a bug)", () => {
  const a = parseCommandArgs(spec("check"), []);
  assert.throws(() => a.string("stream"), /has no string option --stream/);
  assert.throws(() => a.integer("config"), /has no offset\/positive option --config/);
});

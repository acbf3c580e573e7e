import assert from "node:assert/strict";
import { compilePattern, findLeakingGroups } from "./pattern.ts";

Deno.test("findLeakingGroups() passes groups that cannot capture a slash", () => {
  for (
    const pattern of [
      "a/([^/]+)/b",
      "(\\w+)",
      "(\\d+)",
      "(\\d{1,4})",
      "([a-z0-9_-]+)",
      "(\\b(all|new|old)\\b)",
      "(?<name>[^/]+)/(?:/.*)?",
      "((?!/)\\w+)", // a "/" inside a lookahead consumes nothing
      "([^/]+)(?:\\/.*)?$",
      "x/(\\p{L}+)",
      "(\\w+)-\\1", // back-reference to a checked group
      "([\\]x]+)y", // an escaped "]" does not end the class
    ]
  ) {
    assert.deepEqual(findLeakingGroups(pattern), [], pattern);
  }
});

Deno.test("findLeakingGroups() finds groups that can capture a slash", () => {
  const cases: [string, number, string][] = [
    ["(.*)", 1, "."],
    ["(.+)", 1, "."],
    ["([^a])", 1, "[^a]"],
    ["(\\S+)", 1, "\\S"],
    ["(\\W)", 1, "\\W"],
    ["(a/b)", 1, "/"],
    ["(\\d/\\d)", 1, "/"],
    ["(\\d\\/\\d)", 1, "\\/"],
    ["(\\x2f)", 1, "\\x2f"],
    ["(\\u{2F})", 1, "\\u{2F}"],
    ["([!-~]+)", 1, "[!-~]"],
    ["([\\s\\S]+)", 1, "[\\s\\S]"],
    ["(\\p{P}+)", 1, "\\p{P}"],
    ["([^/]+)/(?<rest>.*)", 2, "."],
    ["((?:[^/]+|/x)+)", 1, "/"],
  ];
  for (const [pattern, index, atom] of cases) {
    const found = findLeakingGroups(pattern);
    assert.ok(Array.isArray(found) && found.length > 0, pattern);
    assert.equal(found[0].index, index, pattern);
    assert.equal(found[0].atom, atom, pattern);
  }
});

Deno.test("findLeakingGroups() reports the outer and inner group when both leak", () => {
  const found = findLeakingGroups("x/((.*))");
  assert.ok(Array.isArray(found));
  assert.deepEqual(found.map((g) => [g.index, g.source]), [[1, "((.*))"], [2, "(.*)"]]);
});

Deno.test("compilePattern() anchors the pattern so it matches the whole topic", () => {
  const c = compilePattern("sensors/([^/]+)");
  assert.equal(c.problem, undefined);
  assert.equal(c.regex!.test("sensors/a"), true);
  assert.equal(c.regex!.test("x/sensors/a"), false);
  assert.equal(c.regex!.test("sensors/a/b"), false);
  assert.equal(c.regex!.flags, "u");
});

Deno.test("compilePattern() keeps alternatives inside the anchors", () => {
  const c = compilePattern("a|b");
  assert.equal(c.regex!.test("a"), true);
  assert.equal(c.regex!.test("ab"), false);
  assert.equal(c.regex!.test("xb"), false);
});

Deno.test("compilePattern() refuses text that would escape the anchors", () => {
  assert.match(compilePattern("a)|(b").problem!, /^pattern does not compile: /);
});

Deno.test("compilePattern() counts capture groups, named and nested", () => {
  assert.equal(compilePattern("x").regex !== undefined, true);
  const c = compilePattern("devices/([^/]+)/data/(\\b(all|new|old)\\b)/(?<k>\\d+)(?:/x)?");
  assert.equal(c.problem, undefined);
  if (c.problem === undefined) assert.equal(c.groupCount, 4);
});

Deno.test("compilePattern() refuses a control character, with a hint for a JSON backspace", () => {
  assert.match(
    compilePattern("data/(\b(all|new)\b)").problem!,
    /^pattern contains control character U\+0008 at character 7; "\\b" in a JSON string/,
  );
  assert.match(compilePattern("a\nb").problem!, /^pattern contains control character U\+000A/);
});

import assert from "node:assert/strict";
import { filterLiteralPrefix, filterMatches, filterProblem } from "./filter.ts";

Deno.test("filterMatches() follows MQTT's wildcard table", () => {
  const cases: [string, string, boolean][] = [
    ["building/+/room/#", "building/north/room/42/temp", true],
    ["building/+/room/#", "building/north/room", true], // "#" also matches the parent level
    ["building/+/room/#", "building/north/hall/1", false],
    ["building/+/room/#", "building/room/1", false],
    ["a/+", "a/b", true],
    ["a/+", "a/b/c", false],
    ["a/+", "a/", true], // an empty level is a level
    ["+/+", "/x", true],
    ["#", "a/b/c", true],
    ["a/b", "a/b", true],
    ["a/b", "a/b/c", false],
  ];
  for (const [f, t, want] of cases) assert.equal(filterMatches(f, t), want, `${f} ~ ${t}`);
});

Deno.test("filterMatches() does not match $-topics with a leading wildcard [MQTT-4.7.2-1]", () => {
  assert.equal(filterMatches("#", "$SYS/x"), false);
  assert.equal(filterMatches("+/x", "$dev/x"), false);
  assert.equal(filterMatches("$dev/#", "$dev/x"), true);
  assert.equal(filterMatches("$dev/+", "$dev/x"), true);
});

Deno.test("filterProblem() refuses wildcards that are not whole levels or a '#' not last", () => {
  assert.equal(filterProblem("a/+/b/#"), null);
  assert.equal(filterProblem("#"), null);
  assert.notEqual(filterProblem("a/#/b"), null);
  assert.notEqual(filterProblem("a/b#"), null);
  assert.notEqual(filterProblem("a+/b"), null);
});

Deno.test("filterLiteralPrefix() gives the text every matching topic starts with", () => {
  assert.equal(filterLiteralPrefix("building/+/room/#"), "building/");
  assert.equal(filterLiteralPrefix("a/#"), "a");
  assert.equal(filterLiteralPrefix("#"), "");
  assert.equal(filterLiteralPrefix("a/b/+"), "a/b/");
});

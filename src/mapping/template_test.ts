import assert from "node:assert/strict";
import { expandTemplate, literalTemplate, parseTemplate } from "./template.ts";

function expand(template: string, groups: string[]): string {
  const parsed = parseTemplate(template, groups.length);
  assert.equal(parsed.problem, undefined, parsed.problem ?? "");
  const match = Object.assign(["whole", ...groups], { index: 0, input: "" }) as RegExpExecArray;
  return expandTemplate(parsed.parts!, match);
}

Deno.test("parseTemplate() keeps a template without $ as one literal part", () => {
  assert.deepEqual(parseTemplate("telemetry", 0).parts, ["telemetry"]);
});

Deno.test("parseTemplate() reads $ followed by the longest run of digits as one group", () => {
  assert.deepEqual(parseTemplate("g$12x", 12).parts, ["g", 12, "x"]);
  const groups = Array.from({ length: 12 }, (_, i) => `v${i + 1}`);
  assert.equal(expand("$12", groups), "v12");
  assert.equal(expand("$1$2", groups), "v1v2");
});

Deno.test("parseTemplate() refuses $12 when the pattern has fewer than 12 groups", () => {
  assert.equal(
    parseTemplate("room_$12", 2).problem,
    '"$12" refers to capture group 12, but the pattern has only 2 groups',
  );
});

Deno.test("parseTemplate() reads ${n} as the explicit form, so ${1}0 is group 1 then 0", () => {
  assert.deepEqual(parseTemplate("r${1}0", 1).parts, ["r", 1, "0"]);
  assert.equal(expand("r${1}0", ["4"]), "r40");
});

Deno.test("parseTemplate() reads $$ as a literal $", () => {
  assert.deepEqual(parseTemplate("cost$$", 0).parts, ["cost$"]);
  assert.equal(expand("$$1-$1", ["a"]), "$1-a");
});

Deno.test("parseTemplate() refuses $0", () => {
  assert.match(
    parseTemplate("x_$0", 2).problem!,
    /^"\$0" is not allowed: capture groups are numbered from 1/,
  );
  assert.match(parseTemplate("x_${0}", 2).problem!, /^"\$\{0\}" is not allowed/);
});

Deno.test("parseTemplate() refuses a group reference when the pattern has no groups", () => {
  assert.equal(
    parseTemplate("$1", 0).problem,
    '"$1" refers to capture group 1, but the pattern has no capture groups',
  );
});

Deno.test("parseTemplate() refuses a lone $, an unclosed ${ and a non-number ${name}", () => {
  assert.match(parseTemplate("a$b", 1).problem!, /^lone "\$" at character 2/);
  assert.match(parseTemplate("a$", 1).problem!, /^lone "\$" at character 2/);
  assert.equal(parseTemplate("a${1", 1).problem, 'unclosed "${" at character 2');
  assert.match(parseTemplate("${id}", 1).problem!, /^"\$\{id\}" is not a capture group number/);
});

Deno.test("expandTemplate() expands a group that did not participate to an empty string", () => {
  const regex = /^(?:(a)|(b))$/u;
  const parsed = parseTemplate("[$1|$2]", 2);
  assert.equal(expandTemplate(parsed.parts!, regex.exec("b")!), "[|b]");
});

Deno.test("literalTemplate() doubles every $ so the template expands to the text itself", () => {
  assert.equal(literalTemplate("a$1$"), "a$$1$$");
  assert.deepEqual(parseTemplate(literalTemplate("a$1$"), 0).parts, ["a$1$"]);
});

import assert from "node:assert/strict";
import { parse } from "smol-toml";
import { parseErrorLine } from "./parse_error.ts";

function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error("did not throw");
}

Deno.test("parseErrorLine() gives a TOML error's first line with its line and column", () => {
  const e = thrown(() => parse('[gateway]\nid = "a'));
  assert.equal(parseErrorLine(e), "Invalid TOML document: unfinished string (line 2, column 6)");
});

Deno.test("parseErrorLine() keeps a JSON error's quoted text on one line", () => {
  const line = parseErrorLine(thrown(() => JSON.parse("[\nG\n]")));
  assert.ok(!line.includes("\n"), line);
  assert.match(line, /Unexpected token 'G'/);
});

import assert from "node:assert/strict";
import { utf8, utf8Length } from "./utf8.ts";

const enc = new TextEncoder();

Deno.test("utf8Length() agrees with TextEncoder for well-formed strings", () => {
  for (const s of ["", "a", "é", "€", "😀", "a/é/€/😀", "\u007f\u0080\u07ff\u0800\uffff"]) {
    assert.equal(utf8Length(s), enc.encode(s).length, JSON.stringify(s));
  }
});

Deno.test("utf8Length() counts a lone surrogate as 3 bytes, the U+FFFD that TextEncoder writes", () => {
  const cases = [
    "\ud800", // lone high surrogate at the end
    "\udc00", // lone low surrogate
    "\ud800a", // high surrogate followed by a non-surrogate: not a pair
    "\ud800\ud800\udc00", // lone high, then a pair
    "a\udfff\ud83d",
  ];
  for (const s of cases) {
    assert.equal(utf8Length(s), enc.encode(s).length, JSON.stringify(s));
    assert.equal(utf8Length(s), utf8(s).length, JSON.stringify(s));
  }
  assert.equal(utf8Length("\ud800a"), 4);
});

/**
 * The fake Iggy as a process of its own, for the forward scenario when no real Iggy is given
 * (`IGGY_TEST_ADDRESS` unset): prints `host:port` and serves until killed. Its speed says
 * nothing about Iggy's; the scenario labels figures taken against it.
 *
 *   deno run -A tests/bench/fake_upstream.ts --dialect=0.11
 *
 * @module
 */
import { parseArgs } from "node:util";
import { FakeNode, FakeStore } from "../helpers/fake_iggy/mod.ts";

const { values: a } = parseArgs({
  args: Deno.args,
  options: { dialect: { type: "string", default: "0.11" } },
});
const dialect = a.dialect === "0.12" ? "0.12" : "0.11";
const node = new FakeNode({ dialect, store: new FakeStore() });
console.log(node.listen());

import assert from "node:assert/strict";
import { TopicTrie } from "./topic_trie.ts";
import { filterMatches } from "../mapping/filter.ts";

function matches(t: TopicTrie<string>, topic: string): string[] {
  const out: string[] = [];
  t.match(topic, (v) => out.push(v));
  return out.sort();
}

Deno.test("TopicTrie.match() finds every filter that matches, as filterMatches() says", () => {
  const filters = ["t/+/x", "t/+/y", "t/#", "t/a", "#", "+/+", "+", "t/+/x/#", "$d/#", "$d/+"];
  const t = new TopicTrie<string>();
  for (const f of filters) t.add(f, f);
  const topics = ["t/a", "t/b/x", "t/b/y", "t", "t/b/x/z", "u/v", "$d/q", "$d", "a", "t/"];
  for (const topic of topics) {
    const want = filters.filter((f) => filterMatches(f, topic)).sort();
    assert.deepEqual(matches(t, topic), want, topic);
  }
});

Deno.test("TopicTrie.match() skips '+' and '#' at the first level for $-topics [MQTT-4.7.2-1]", () => {
  const t = new TopicTrie<string>();
  t.add("#", "all");
  t.add("+/x", "plus");
  t.add("$SYS/#", "sys");
  assert.deepEqual(matches(t, "$SYS/x"), ["sys"]);
});

Deno.test("TopicTrie.remove() prunes branches and keeps other values", () => {
  const t = new TopicTrie<string>();
  t.add("a/+/c", "1");
  t.add("a/+/c", "2");
  t.add("a/#", "3");
  t.remove("a/+/c", "1");
  assert.deepEqual(matches(t, "a/b/c"), ["2", "3"]);
  t.remove("a/+/c", "2");
  t.remove("a/#", "3");
  assert.equal(t.size, 0);
  assert.deepEqual(matches(t, "a/b/c"), []);
  t.remove("x/y", "nothing"); // absent: no effect
});

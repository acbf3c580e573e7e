/**
 * A topic trie of wildcard filters (EMQ's route design): one node per filter
 * level, `+` and `#` as their own children, so matching a topic walks its levels once instead
 * of testing every filter. Exact filters do not go here: the registry's hash serves them.
 *
 * @module
 */

interface TrieNode<V> {
  readonly children: Map<string, TrieNode<V>>;
  /** Values whose filter ends at this node. */
  values: Set<V> | null;
}

function node<V>(): TrieNode<V> {
  return { children: new Map(), values: null };
}

/** Filters → values, matched against topic names. */
export class TopicTrie<V> {
  #root: TrieNode<V> = node();
  #size = 0;

  /** Number of (filter, value) entries. */
  get size(): number {
    return this.#size;
  }

  /** Adds `value` under the (well-formed) filter; adding it twice is one entry. */
  add(filter: string, value: V): void {
    let n = this.#root;
    for (const level of filter.split("/")) {
      let next = n.children.get(level);
      if (!next) n.children.set(level, next = node());
      n = next;
    }
    n.values ??= new Set();
    if (!n.values.has(value)) {
      n.values.add(value);
      this.#size++;
    }
  }

  /** Removes `value` from the filter; empty branches are pruned. */
  remove(filter: string, value: V): void {
    const levels = filter.split("/");
    const path: TrieNode<V>[] = [this.#root];
    for (const level of levels) {
      const next = path[path.length - 1].children.get(level);
      if (!next) return;
      path.push(next);
    }
    const leaf = path[path.length - 1];
    if (!leaf.values?.delete(value)) return;
    this.#size--;
    if (leaf.values.size === 0) leaf.values = null;
    for (let i = levels.length; i > 0; i--) {
      const n = path[i];
      if (n.values !== null || n.children.size > 0) break;
      path[i - 1].children.delete(levels[i - 1]);
    }
  }

  /**
   * Calls `visit` with every value whose filter matches `topic`. A leading `+` or `#` does not
   * match a topic starting with `$` [MQTT-4.7.2-1]; `a/#` matches `a` [MQTT-4.7.1-2].
   */
  match(topic: string, visit: (value: V) => void): void {
    if (this.#size === 0) return;
    const levels = topic.split("/");
    this.#walk(this.#root, levels, 0, topic.startsWith("$"), visit);
  }

  #walk(
    n: TrieNode<V>,
    levels: readonly string[],
    i: number,
    dollar: boolean,
    visit: (value: V) => void,
  ): void {
    const wild = !(dollar && i === 0);
    if (wild) n.children.get("#")?.values?.forEach(visit);
    if (i === levels.length) {
      n.values?.forEach(visit);
      return;
    }
    const exact = n.children.get(levels[i]);
    if (exact) this.#walk(exact, levels, i + 1, dollar, visit);
    const plus = wild ? n.children.get("+") : undefined;
    if (plus) this.#walk(plus, levels, i + 1, dollar, visit);
  }
}

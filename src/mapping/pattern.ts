/**
 * Rule patterns: compile them the way P2 matches them, and refuse capture groups that could
 * carry "/" into a stream, topic or key name (at compile time).
 *
 * @module
 */

/** A compiled pattern, or the reason the pattern is refused. */
export type PatternCompile =
  | { readonly regex: RegExp; readonly groupCount: number; readonly problem?: undefined }
  | { readonly problem: string; readonly regex?: undefined };

/** A capturing group whose text can contain "/". */
export interface LeakingGroup {
  /** 1-based group number, as `$n` counts. */
  readonly index: number;
  /** The group as written, parentheses included. */
  readonly source: string;
  /** The first piece of the group that can match "/". */
  readonly atom: string;
}

/**
 * Refuses C0 controls and DEL in a pattern: almost always an escape that went wrong, e.g. the
 * Strimzi README's `"\b"` in JSON, which is a backspace, not a word boundary. Such a rule would
 * silently never match (it never does in Strimzi either); refusing it says why.
 */
function controlProblem(pattern: string): string | null {
  let at = -1;
  for (let i = 0; i < pattern.length && at === -1; i++) {
    const unit = pattern.charCodeAt(i);
    if (unit < 0x20 || unit === 0x7f) at = i;
  }
  if (at === -1) return null;
  const code = pattern.charCodeAt(at).toString(16).toUpperCase().padStart(4, "0");
  const hint = code === "0008"
    ? `; "\\b" in a JSON string or TOML basic string is a backspace: write "\\\\b" ` +
      `(or use a TOML literal string '…') for a word boundary`
    : "";
  return `pattern contains control character U+${code} at character ${at + 1}${hint}`;
}

/**
 * Compiles a rule pattern for P2: anchored to match the WHOLE topic (`^(?:…)$`) with the "u"
 * flag, and never "g" or "y", whose `lastIndex` state would make matching impure.
 * The pattern is first compiled on its own, so text like `a)|(b` cannot escape the anchors.
 */
export function compilePattern(pattern: string): PatternCompile {
  const control = controlProblem(pattern);
  if (control !== null) return { problem: control };
  let regex: RegExp;
  let groupCount: number;
  try {
    // An empty alternative always matches "", so the match array length is the group count + 1.
    groupCount = new RegExp(`${pattern}|`, "u").exec("")!.length - 1;
    regex = new RegExp(`^(?:${pattern})$`, "u");
  } catch (e) {
    return { problem: `pattern does not compile: ${(e as Error).message}` };
  }
  const leak = findLeakingGroups(pattern);
  if (leak === "unparsed") {
    return { problem: 'pattern could not be analysed for capture groups that match "/"' };
  }
  if (leak.length > 0) {
    const g = leak[0];
    return {
      problem: `capture group ${g.index} ${JSON.stringify(g.source)} can match "/" ` +
        `(through ${JSON.stringify(g.atom)}), which would leak topic levels into names; ` +
        `use "([^/]+)" for one level (MQTT "+") or a non-capturing "(?:/.*)?" for the rest (MQTT "/#")`,
    };
  }
  return { regex, groupCount };
}

interface OpenGroup {
  readonly index: number | null; // capture number, null when not capturing
  readonly lookaround: boolean;
  readonly start: number;
  atom: string | null; // first atom inside that can match "/"
}

/** Whether one consuming atom (a literal, escape, class or ".") can match "/". */
function atomMatchesSlash(atom: string): boolean {
  if (atom === "/" || atom === ".") return true; // "." matches any character but line breaks
  if (!atom.startsWith("\\") && !atom.startsWith("[")) return false; // another literal
  try {
    return new RegExp(`^(?:${atom})$`, "u").test("/");
  } catch {
    return true; // cannot tell: be conservative
  }
}

/** End (exclusive) of the escape starting at `i` (source[i] === "\\"), and whether it consumes. */
function scanEscape(source: string, i: number): { end: number; consumes: boolean } {
  const c = source[i + 1];
  if (c >= "1" && c <= "9") { // back-reference: repeats a group that is checked on its own
    let end = i + 2;
    while (source[end] >= "0" && source[end] <= "9") end++;
    return { end, consumes: false };
  }
  if (c === "k") return { end: source.indexOf(">", i) + 1, consumes: false };
  if (c === "b" || c === "B") return { end: i + 2, consumes: false };
  if ((c === "p" || c === "P" || c === "u") && source[i + 2] === "{") {
    return { end: source.indexOf("}", i) + 1, consumes: true };
  }
  if (c === "u") return { end: i + 6, consumes: true };
  if (c === "x") return { end: i + 4, consumes: true };
  if (c === "c") return { end: i + 3, consumes: true };
  return { end: i + 1 + String.fromCodePoint(source.codePointAt(i + 1)!).length, consumes: true };
}

/** End (exclusive) of the character class starting at `i` (source[i] === "["). */
function scanClass(source: string, i: number): number {
  let j = i + 1;
  while (j < source.length && source[j] !== "]") j += source[j] === "\\" ? 2 : 1;
  return j + 1;
}

/** Opens the group at `i` (source[i] === "("); returns it and where its body starts. */
function openGroup(source: string, i: number, count: number): { group: OpenGroup; body: number } {
  if (source[i + 1] !== "?") {
    return { group: { index: count + 1, lookaround: false, start: i, atom: null }, body: i + 1 };
  }
  const rest = source.slice(i + 2, i + 4);
  if (rest[0] === "=" || rest[0] === "!" || rest === "<=" || rest === "<!") {
    return { group: { index: null, lookaround: true, start: i, atom: null }, body: i + 2 };
  }
  if (rest[0] === "<") { // named capturing group (?<name>…)
    return {
      group: { index: count + 1, lookaround: false, start: i, atom: null },
      body: source.indexOf(">", i) + 1,
    };
  }
  // (?:…) and modifier groups such as (?i:…)
  return {
    group: { index: null, lookaround: false, start: i, atom: null },
    body: source.indexOf(":", i) + 1,
  };
}

/**
 * Finds the capturing groups of a (valid, "u"-flag) pattern whose captured text can contain "/".
 *
 * Approach: tokenise the pattern and test every *consuming* atom (literal character, escape such
 * as `\W` or `\x2f`, character class, ".") on its own against "/". Any "/" in a group's capture
 * was consumed by one of the atoms inside that group, so a group none of whose atoms can match
 * "/" can never capture one: `([^/]+)`, `(\w+)`, `(\d{1,4})`, `([a-z0-9_-]+)` pass; `(.*)`,
 * `(.+)`, `([^a])`, `(\S+)`, `(a/b)`, `(\d/\d)` are refused. Atoms inside lookarounds consume
 * nothing and are skipped; back-references repeat another capturing group, which is checked on
 * its own, and are skipped too.
 *
 * Limits: the check is per atom, not per path, so it can refuse a group that could never
 * actually use its "/"-matching atom (e.g. `(a|\/{0})`, or an atom ruled out by a lookahead).
 * Such patterns are contrived; the fix is to write the group without that atom. Patterns are
 * compiled with "u" and no "i"/"v" flag, which this tokeniser assumes.
 *
 * @returns the leaking groups in order, or "unparsed" if the tokeniser lost track (never
 *   expected for a pattern that compiles; the caller refuses the pattern rather than guess).
 */
export function findLeakingGroups(source: string): LeakingGroup[] | "unparsed" {
  const open: OpenGroup[] = [];
  const leaking: LeakingGroup[] = [];
  let count = 0;
  let lookarounds = 0;
  let i = 0;
  const consume = (atom: string) => {
    if (lookarounds > 0 || !atomMatchesSlash(atom)) return;
    for (const g of open) g.atom ??= atom;
  };
  while (i < source.length) {
    const ch = source[i];
    if (ch === "\\") {
      const { end, consumes } = scanEscape(source, i);
      if (end <= i) return "unparsed";
      if (consumes) consume(source.slice(i, end));
      i = end;
    } else if (ch === "[") {
      const end = scanClass(source, i);
      consume(source.slice(i, end));
      i = end;
    } else if (ch === "(") {
      const { group, body } = openGroup(source, i, count);
      if (body <= i) return "unparsed";
      if (group.index !== null) count = group.index;
      if (group.lookaround) lookarounds++;
      open.push(group);
      i = body;
    } else if (ch === ")") {
      const g = open.pop();
      if (g === undefined) return "unparsed";
      if (g.lookaround) lookarounds--;
      if (g.index !== null && g.atom !== null) {
        leaking.push({ index: g.index, source: source.slice(g.start, i + 1), atom: g.atom });
      }
      i++;
    } else if (ch === "{") { // quantifier {n}, {n,}, {n,m}
      i = source.indexOf("}", i) + 1;
      if (i === 0) return "unparsed";
    } else if ("*+?|^$".includes(ch)) {
      i++;
    } else {
      const atom = String.fromCodePoint(source.codePointAt(i)!);
      consume(atom);
      i += atom.length;
    }
  }
  if (open.length !== 0) return "unparsed";
  return leaking.sort((a, b) => a.index - b.index);
}

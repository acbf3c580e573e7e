/**
 * Name templates: `stream`, `topic` and `partition_key` (Strimzi: `kafkaTopic`, `kafkaKey`).
 *
 * Syntax, decided so that every template has exactly one reading:
 * - `$` followed by the longest run of digits is that capture group: `$1`, `$12`. So `$12`
 *   always means group 12 (refused at compile time if the pattern has fewer groups), never
 *   group 1 followed by "2". To put a digit right after group 1, write `${1}2`.
 * - `${n}` is the explicit form of `$n`.
 * - `$$` is a literal `$`.
 * - Any other `$` is refused, so a typo cannot silently become part of a name.
 * - `$0` is refused: groups are numbered from 1 (the whole topic would leak levels into names).
 *
 * Strimzi's own mapper replaces `$1`, `$2`, … as plain substrings, in order, which makes `$12`
 * ambiguous there; the README's rules use only `$1`..`$9`, which read the same under both.
 *
 * @module
 */

/** One piece of a parsed template: literal text, or a 1-based capture group number. */
export type TemplatePart = string | number;

/** A parsed template, or the reason it cannot be parsed. */
export type TemplateParse =
  | { readonly parts: readonly TemplatePart[]; readonly problem?: undefined }
  | { readonly problem: string; readonly parts?: undefined };

function groupsPhrase(groupCount: number): string {
  if (groupCount === 0) return "the pattern has no capture groups";
  return `the pattern has only ${groupCount} group${groupCount === 1 ? "" : "s"}`;
}

function checkGroup(written: string, n: number, groupCount: number): string | null {
  if (n === 0) {
    return `"${written}" is not allowed: capture groups are numbered from 1 ` +
      `($0 would be the whole topic)`;
  }
  if (n > groupCount) {
    return `"${written}" refers to capture group ${n}, but ${groupsPhrase(groupCount)}`;
  }
  return null;
}

function isDigit(ch: string | undefined): boolean {
  return ch !== undefined && ch >= "0" && ch <= "9";
}

/**
 * Parses `template` against a pattern with `groupCount` capture groups.
 * Adjacent literal text is merged, so a template without group references has one part.
 */
export function parseTemplate(template: string, groupCount: number): TemplateParse {
  const parts: TemplatePart[] = [];
  let literal = "";
  let i = 0;
  while (i < template.length) {
    const ch = template[i];
    if (ch !== "$") {
      literal += ch;
      i++;
      continue;
    }
    const next = template[i + 1];
    if (next === "$") {
      literal += "$";
      i += 2;
      continue;
    }
    let written: string;
    let digits: string;
    if (isDigit(next)) {
      let end = i + 1;
      while (isDigit(template[end])) end++; // the longest run of digits
      written = template.slice(i, end);
      digits = written.slice(1);
      i = end;
    } else if (next === "{") {
      const close = template.indexOf("}", i + 2);
      if (close === -1) return { problem: `unclosed "\${" at character ${i + 1}` };
      written = template.slice(i, close + 1);
      digits = template.slice(i + 2, close);
      if (!/^[0-9]+$/.test(digits)) {
        return { problem: `"${written}" is not a capture group number: write "\${n}" with n >= 1` };
      }
      i = close + 1;
    } else {
      return {
        problem: `lone "$" at character ${i + 1}: write "$$" for a literal "$", ` +
          `"$n" or "\${n}" for capture group n`,
      };
    }
    const n = Number(digits);
    const problem = checkGroup(written, n, groupCount);
    if (problem !== null) return { problem };
    if (literal !== "") parts.push(literal);
    literal = "";
    parts.push(n);
  }
  if (literal !== "" || parts.length === 0) parts.push(literal);
  return { parts };
}

/** The template's text when it has no group references, else `null`. */
export function constantOf(parts: readonly TemplatePart[]): string | null {
  return parts.length === 1 && typeof parts[0] === "string" ? parts[0] : null;
}

/** All literal text of the template: the shortest thing it can ever expand to. */
export function literalText(parts: readonly TemplatePart[]): string {
  return parts.filter((p): p is string => typeof p === "string").join("");
}

/**
 * Expands parsed parts with the captures of one match (P3). A group that did not take part in
 * the match (e.g. inside an unused alternative) expands to "".
 */
export function expandTemplate(
  parts: readonly TemplatePart[],
  match: RegExpExecArray,
): string {
  if (parts.length === 1 && typeof parts[0] === "string") return parts[0];
  let out = "";
  for (const part of parts) out += typeof part === "string" ? part : (match[part] ?? "");
  return out;
}

/** Writes `text` as a template that expands to exactly `text` (every `$` doubled). */
export function literalTemplate(text: string): string {
  return text.replaceAll("$", "$$$$");
}

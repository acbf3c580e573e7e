/**
 * MQTT topic filters (`+` one level, `#` the rest): their shape rules [MQTT-4.7.1], matching a
 * topic name against one, and the literal text every matching topic starts with. Pure.
 *
 * @module
 */

/** Why a filter is malformed, or null when its wildcards are placed as MQTT requires. */
export function filterProblem(filter: string): string | null {
  const levels = filter.split("/");
  for (let i = 0; i < levels.length; i++) {
    const level = levels[i];
    if (level === "#") {
      if (i !== levels.length - 1) return '"#" must be the last level [MQTT-4.7.1-2]';
    } else if (level !== "+" && (level.includes("#") || level.includes("+"))) {
      return "a wildcard must be a whole level [MQTT-4.7.1-2], [MQTT-4.7.1-3]";
    }
  }
  return null;
}

/** Whether the filter has a `+` or `#` level (assumes a well-formed filter). */
export function isWildcardFilter(filter: string): boolean {
  return filter.includes("+") || filter.includes("#");
}

/**
 * Whether `topic` matches the well-formed `filter`. A filter starting with a wildcard does not
 * match a topic starting with `$` [MQTT-4.7.2-1]; `a/#` matches `a` itself [MQTT-4.7.1-2].
 */
export function filterMatches(filter: string, topic: string): boolean {
  if (topic.startsWith("$") && (filter[0] === "+" || filter[0] === "#")) return false;
  const f = filter.split("/");
  const t = topic.split("/");
  for (let i = 0; i < f.length; i++) {
    if (f[i] === "#") return true;
    if (i >= t.length) return false;
    if (f[i] !== "+" && f[i] !== t[i]) return false;
  }
  return f.length === t.length;
}

/**
 * The text before the filter's first wildcard level: every topic the filter matches starts
 * with it (`building/+/room/#` → `building/`; `a/#` → `a`, since `a/#` matches `a`).
 */
export function filterLiteralPrefix(filter: string): string {
  const levels = filter.split("/");
  let out = "";
  for (let i = 0; i < levels.length; i++) {
    if (levels[i] === "+" || levels[i] === "#") {
      // "a/#" also matches "a": the "/" before "#" is not certain.
      return levels[i] === "#" && out.endsWith("/") ? out.slice(0, -1) : out;
    }
    out += i < levels.length - 1 ? `${levels[i]}/` : levels[i];
  }
  return out;
}

/**
 * The closest name to a mistyped one, for "did you mean" in a config error: the smallest edit
 * distance (insertions, deletions, substitutions), if it is small for the name's length.
 *
 * @module
 */

/** Edit distance between `a` and `b` (two rows of the usual table). */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitute = prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1);
      row.push(Math.min(prev[j] + 1, row[j - 1] + 1, substitute));
    }
    prev = row;
  }
  return prev[b.length];
}

/**
 * The candidate closest to `name`, or null when none is within a quarter of its length (at
 * least 2 edits): a guess past that would mislead more than help.
 */
export function closestName(name: string, candidates: Iterable<string>): string | null {
  const bound = Math.max(2, Math.floor(name.length / 4));
  let best: string | null = null;
  let bestDistance = bound + 1;
  for (const c of candidates) {
    const d = editDistance(name, c);
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return best;
}

/**
 * The IGGY_MQTT_* names one slip away from `name` (after its prefix). Without full env access
 * these are the names the gateway can look for, and each look costs memory for the life of
 * the process, so there are two sets: `thorough` (`check`): a character left out, doubled or
 * swapped with its neighbour, or an `S` added at the end of a word; otherwise (`run`, reload)
 * the slips of whole words only: an `S` added or left out at the end of a word, or an
 * underscore left out. A wholly different name is never seen.
 */
export function nearMissNames(name: string, thorough: boolean): string[] {
  const prefix = "IGGY_MQTT_";
  const rest = name.slice(prefix.length);
  const out: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    const wordEnd = rest[i + 1] === "_" || i + 1 === rest.length;
    if (wordEnd) out.push(rest.slice(0, i + 1) + "S" + rest.slice(i + 1)); // plural
    if (thorough) {
      out.push(rest.slice(0, i) + rest.slice(i + 1)); // left out
      out.push(rest.slice(0, i + 1) + rest.slice(i)); // doubled
      if (i + 1 < rest.length) {
        out.push(rest.slice(0, i) + rest[i + 1] + rest[i] + rest.slice(i + 2)); // swapped
      }
    } else if ((wordEnd && rest[i] === "S") || rest[i] === "_") {
      out.push(rest.slice(0, i) + rest.slice(i + 1)); // plural S or underscore left out
    }
  }
  return out.filter((n) => n !== "" && n !== rest).map((n) => prefix + n);
}

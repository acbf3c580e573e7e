/**
 * A parser's error as one line: operator errors are printed as they are, one line naming what
 * and where. smol-toml's messages carry an excerpt of the file with a caret under the fault
 * (several lines); V8's JSON messages quote the text around the fault, newlines included.
 *
 * @module
 */

/**
 * The first line of a parser error's message, with the line and column when the parser gives
 * them (smol-toml's `TomlError`); any other newline in the message becomes a space.
 */
export function parseErrorLine(e: unknown): string {
  if (!(e instanceof Error)) return String(e).replace(/\s*\n\s*/g, " ");
  const { line, column } = e as { line?: unknown; column?: unknown };
  if (typeof line === "number" && typeof column === "number") {
    return `${e.message.split("\n")[0].trim()} (line ${line}, column ${column})`;
  }
  return e.message.replace(/\s*\n\s*/g, " ").trim();
}

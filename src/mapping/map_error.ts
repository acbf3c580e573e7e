/**
 * The one domain error of the mapping module: a topic map that must not be used.
 *
 * @module
 */

/**
 * A topic map was refused at compile time. The gateway exits non-zero with this message
 * (it refuses to start on a bad map); `check` prints it.
 *
 * The message names the file, the rule (1-based, in file order) and the key:
 * `config/topic-map.toml: rule 1 (partition_key): "$3" refers to capture group 3, but the pattern has only 2 groups`
 * or, for a file-level problem, `config/topic-map.toml: default_stream: is missing`.
 */
export class MapError extends Error {
  /** Stable code for callers that branch on error kinds. */
  readonly code = "map_invalid";
  /** Where the map came from (a path, or a label such as `<inline>`). */
  readonly source: string;
  /** 1-based rule number in file order; `null` for a file-level problem. */
  readonly rule: number | null;
  /** The key at fault as written in the file: `stream`, `mqtt_topic`, `default_stream`, `kafkaKey`, … */
  readonly key: string;

  /**
   * @param source where the map came from
   * @param rule 1-based rule number, or `null` for a file-level problem
   * @param key the key at fault, as spelled in the file
   * @param problem what is wrong, sentence fragment without the location prefix
   * @param options `cause` for an underlying parser or RegExp error
   */
  constructor(
    source: string,
    rule: number | null,
    key: string,
    problem: string,
    options?: ErrorOptions,
  ) {
    const where = rule === null ? `${key}` : `rule ${rule} (${key})`;
    super(`${source}: ${where}: ${problem}`, options);
    this.name = "MapError";
    this.source = source;
    this.rule = rule;
    this.key = key;
  }
}

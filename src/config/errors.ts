/** A configuration problem. `key` names the offending key (e.g. `limits.max_packet_bytes`). */
export class ConfigError extends Error {
  readonly code = "config_invalid";
  readonly key: string;
  constructor(key: string, message: string, options?: { cause?: unknown }) {
    super(`Invalid config key "${key}": ${message}`, options);
    this.name = "ConfigError";
    this.key = key;
  }
}

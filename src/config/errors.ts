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

/** Stable codes of {@link OperatorError}: what the operator has to fix. */
export type OperatorErrorCode =
  | "address_in_use" // another process holds the listener's port
  | "address_not_available" // the host part is no address of this machine
  | "permission_denied" // the OS refused (file mode, privileged port)
  | "not_capable" // outside the Deno permission set "gateway"
  | "not_found" // a named file or store does not exist
  | "invalid_file" // a file exists but its content cannot be used (TLS material)
  | "login_failed" // `check` could not log in to Iggy (refused, unreachable)
  | "out_of_range" // a CLI value names something that does not exist (a partition)
  | "unreachable" // an admin command cannot reach the gateway's HTTP listener
  | "admin_refused"; // the gateway refused an admin action (token, no such client)

/**
 * A problem in the gateway's surroundings, not in its code: a port in use, a file that cannot
 * be read, a permission wall. The message is one line naming what and where
 * (`HTTP listener 127.0.0.1:8080: address already in use`); main.ts prints it without a stack,
 * which stays reserved for real bugs.
 */
export class OperatorError extends Error {
  readonly code: OperatorErrorCode;
  constructor(code: OperatorErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "OperatorError";
    this.code = code;
  }
}

/**
 * One line for a listener that cannot bind: which listener, which address, why
 * (`HTTP listener 127.0.0.1:8080: address already in use`). Shared by the MQTT listeners
 * (node:net and Deno) and the HTTP server.
 *
 * @module
 */
import { OperatorError, type OperatorErrorCode } from "../config/errors.ts";

/** Deno error classes and node:net error codes that mean "the operator must fix this". */
const BIND_REASONS: [new (...a: never[]) => Error, string, OperatorErrorCode, string][] = [
  [Deno.errors.AddrInUse, "EADDRINUSE", "address_in_use", "address already in use"],
  [Deno.errors.AddrNotAvailable, "EADDRNOTAVAIL", "address_not_available", "address not available"],
  [Deno.errors.PermissionDenied, "EACCES", "permission_denied", "permission denied"],
  // Deno's node:net reports a host that is no address of this machine as EINVAL, not
  // EADDRNOTAVAIL (seen with Deno 2.9.6).
  [Deno.errors.AddrNotAvailable, "EINVAL", "address_not_available", "address not available"],
];

/**
 * Maps a bind failure of `listener` (e.g. `MQTT listener`) on `hostname:port` to an
 * {@link OperatorError}; any other error is returned unchanged, to surface as a bug.
 */
export function bindError(listener: string, hostname: string, port: number, err: unknown): unknown {
  const nodeCode = (err as { code?: unknown } | null)?.code;
  for (const [kind, code, ours, reason] of BIND_REASONS) {
    if (err instanceof kind || nodeCode === code) {
      return new OperatorError(ours, `${listener} ${formatAddress(hostname, port)}: ${reason}`, {
        cause: err,
      });
    }
  }
  return err;
}

/** `host:port`, with an IPv6 host in brackets as in a URL (`[::]:1883`). */
export function formatAddress(hostname: string, port: number): string {
  return hostname.includes(":") ? `[${hostname}]:${port}` : `${hostname}:${port}`;
}

/**
 * `host:port` addresses, split once for the config's listener keys and the Iggy dialer.
 *
 * @module
 */

/** A host and a port, as `Deno.listen` and `Deno.connect` take them. */
export interface HostPort {
  readonly hostname: string;
  readonly port: number;
}

/**
 * Splits `host:port` (IPv6 as `[::1]:1883`). Returns `null` for any other shape. The port is
 * not range-checked here: a listener may take 0 (any free port), a dialer may not, so each
 * caller checks the range and names its own key or address in the error.
 */
export function splitHostPort(value: string): HostPort | null {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]+)):(\d{1,5})$/.exec(value);
  return m === null ? null : { hostname: m[1] ?? m[2], port: Number(m[3]) };
}

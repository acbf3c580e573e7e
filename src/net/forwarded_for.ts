/**
 * The client's address behind an HTTP proxy on the WebSocket listeners: `X-Forwarded-For`,
 * taken only from a peer in `listeners.proxy_protocol_from`. Each proxy appends the address it
 * got the request from, so the list is read from its right end, past the trusted proxies; the
 * first address that is not one of them is the client. From any other peer the header is not
 * taken (its connection keeps the peer's address): an HTTP forward proxy of the client's own
 * network may add one, and the gateway cannot tell it from a forgery.
 *
 * @module
 */
import { formatIp, type IpBlockSet, parseIp } from "../base/ip.ts";

/** Addresses read from one header at most; a longer chain is refused as malformed. */
export const MAX_FORWARDED_HOPS = 32;

/** The connection's address, or why its header was refused (the upgrade gets a 400). */
export type ForwardedClient =
  | { readonly address: string }
  | { readonly refused: string };

/**
 * The address to use for a request from `peer` carrying `header` (`X-Forwarded-For`, every
 * occurrence joined by commas), with `trusted` the proxies whose header is taken.
 */
export function forwardedClient(
  header: string | null,
  peer: string,
  trusted: IpBlockSet,
): ForwardedClient {
  if (header === null || !trusted.has(peer)) return { address: peer };
  const hops = header.split(",");
  if (hops.length > MAX_FORWARDED_HOPS) {
    return { refused: `X-Forwarded-For of ${hops.length} addresses, over ${MAX_FORWARDED_HOPS}` };
  }
  let address = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i].trim();
    const ip = parseIp(hop.startsWith("[") && hop.endsWith("]") ? hop.slice(1, -1) : hop);
    if (ip === null) return { refused: `X-Forwarded-For: "${hop.slice(0, 64)}" is not an IP` };
    address = formatIp(ip);
    if (!trusted.has(address)) break;
  }
  return { address };
}

/**
 * The Iggy backend: the gateway's own client for Iggy's TCP binary protocols 0.11.0 (Iggy
 * 0.9) and 0.12.2 (Iggy 0.10), the dialect chosen per connection (`dialect.ts`), implementing
 * the backend port.
 *
 * @module
 */

export { IggyBackend, POLL_CONSUMER } from "./backend.ts";
export { loginRefusalOf } from "./errors.ts";
export type { IggyBackendDeps } from "./dial.ts";
export type { Dialer, Transport } from "./dial.ts";
export {
  formatVersion,
  PROTOCOL_VERSION,
  PROTOCOL_VERSION_PACKED,
  type ProtocolVersion,
} from "./version.ts";

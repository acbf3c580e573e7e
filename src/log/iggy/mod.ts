/**
 * The Iggy backend: the gateway's own client for Iggy's TCP binary protocol 0.11.0 (VSR
 * framing, Iggy server 0.9.0), implementing the backend port.
 *
 * @module
 */

export { IggyBackend, type IggyBackendDeps, POLL_CONSUMER } from "./backend.ts";
export type { Dialer, Transport } from "./dial.ts";
export {
  formatVersion,
  PROTOCOL_VERSION,
  PROTOCOL_VERSION_PACKED,
  type ProtocolVersion,
} from "./version.ts";

/**
 * The `--version` line: the gateway's version, the MQTT versions and the Iggy binary protocols
 * it speaks.
 *
 * @module
 */
import { GATEWAY_VERSION } from "../base/version.ts";
import { formatVersion, PROTOCOL_VERSION } from "../log/iggy/version.ts";
import { PROTOCOL_012 } from "../log/iggy/v12/wire.ts";

/** What `--version` prints. */
export function versionLine(): string {
  const iggy = `${formatVersion(PROTOCOL_VERSION)} and ${formatVersion(PROTOCOL_012)}`;
  return `iggy-mqtt-gateway ${GATEWAY_VERSION} (MQTT 3.1.1 and 5; Iggy binary protocols ${iggy})`;
}

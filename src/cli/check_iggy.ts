/**
 * `check` in Iggy mode and forward mode: logs in to Iggy with the configured credentials,
 * through the gateway's own client and its connect path (`iggy.protocol`, `auto` included),
 * and says what it found; then the mapped topics' durability (Iggy mode) or the forward plan
 * (forward mode) over that login. A login that fails throws an {@link OperatorError} whose one
 * line names the key to fix. `--offline` skips the network and says so.
 *
 * @module
 */
import type { GatewayConfig } from "../config/types.ts";
import { logIn } from "./iggy_login.ts";
import type { CompiledMap } from "../mapping/mod.ts";
import { durabilityLines } from "./check_durability.ts";
import { forwardPlanLines } from "./check_forward.ts";

/** Lines about Iggy (none when the config uses no Iggy). */
export async function iggyLines(
  config: GatewayConfig,
  map: CompiledMap,
  offline: boolean,
): Promise<string[]> {
  if (config.gateway.backend !== "iggy" && !config.forward.enabled) return [];
  if (offline) {
    return [
      `iggy: not logged in (--offline): Iggy at ${config.iggy.address}, the credentials and the topics there were not checked`,
      ...await forwardPlanLines(config, map, null),
    ];
  }
  const iggy = await logIn(config);
  try {
    const found = iggy.health().detail ?? "Iggy";
    return [
      `iggy: logged in to Iggy at ${config.iggy.address} as ${who(config)}: ${found}`,
      ...await durabilityLines(config, map, iggy),
      ...await forwardPlanLines(config, map, iggy),
    ];
  } finally {
    await iggy.close();
  }
}

/** `user "iggy"` or `a personal access token`. */
function who(config: GatewayConfig): string {
  return config.iggy.token !== "" ? "a personal access token" : `user "${config.iggy.username}"`;
}

/**
 * Reading the files the configuration names (config, topic map, TLS material), with errors
 * that name the key and the file.
 *
 * @module
 */
import { ConfigError } from "./errors.ts";
import { loadConfig } from "./load.ts";
import type { GatewayConfig } from "./types.ts";
import { envNameOf, KEY_SPECS } from "./schema.ts";

/**
 * The gateway's own environment variables. With full env access every IGGY_MQTT_* name is
 * seen (so unknown ones are refused); under the least-privilege permission set (prefix only)
 * each documented name is read one by one.
 */
function readOwnEnv(): Record<string, string> {
  try {
    return Deno.env.toObject();
  } catch {
    const out: Record<string, string> = {};
    for (const s of KEY_SPECS) {
      const v = Deno.env.get(envNameOf(s.key));
      if (v !== undefined) out[envNameOf(s.key)] = v;
    }
    return out;
  }
}

/** Reads a file named by config key `key`; throws ConfigError naming key and path. */
export async function readKeyFile(key: string, path: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch (err) {
    throw new ConfigError(key, `cannot read "${path}": ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/**
 * Loads the config file (a missing default file is allowed: built-in defaults apply) with
 * the process environment laid over it.
 */
export async function loadConfigFile(
  path: string,
  mustExist: boolean,
  env: Record<string, string> = readOwnEnv(),
): Promise<GatewayConfig> {
  let text = "";
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    if (mustExist || !(err instanceof Deno.errors.NotFound)) {
      throw new ConfigError("--config", `cannot read "${path}": ${(err as Error).message}`);
    }
  }
  const ours: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (k.startsWith("IGGY_MQTT_")) ours[k] = v;
  return loadConfig({ text, source: path, env: ours });
}

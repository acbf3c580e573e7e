/**
 * Reading the files the configuration names (config, topic map, TLS material, Iggy CA), with
 * errors that name the file's role and path in one line ({@link OperatorError}).
 *
 * @module
 */
import { OperatorError, type OperatorErrorCode } from "./errors.ts";
import { loadConfig } from "./load.ts";
import type { GatewayConfig } from "./types.ts";
import { envNameOf, KEY_SPECS } from "./schema.ts";
import { nearMissNames } from "./closest_key.ts";
import { type FileAccess, notCapableMessage } from "./permission_set.ts";

/**
 * The gateway's own environment variables. With full env access every IGGY_MQTT_* name is
 * seen. Under the permission sets (env access by prefix only) Deno cannot list the
 * environment, so each name is read one by one: every documented one and its lower-case
 * form, and the names a slip of the keyboard away from one ({@link nearMissNames}; `thorough`
 * for `check`, in both cases), so that a typo is refused rather than ignored. Each name read
 * stays in Deno's permission state for the life of the process, which is why `run` reads the
 * small set and has `check --env-only` run before it (deno.json's start tasks, the unit).
 */
export function readOwnEnv(thorough = false): Record<string, string> {
  try {
    return Deno.env.toObject();
  } catch {
    const out: Record<string, string> = {};
    const look = (n: string) => {
      const v = Deno.env.get(n);
      if (v !== undefined) out[n] = v;
    };
    for (const s of KEY_SPECS) {
      const name = envNameOf(s.key);
      look(name);
      look(name.toLowerCase());
      for (const n of nearMissNames(name, thorough)) {
        look(n);
        if (thorough) look(n.toLowerCase());
      }
    }
    return out;
  }
}

/** The operator-facing errors of file access, by Deno error class. */
const FS_REASONS: [new (...a: never[]) => Error, OperatorErrorCode, string][] = [
  [Deno.errors.NotFound, "not_found", "not found"],
  [Deno.errors.PermissionDenied, "permission_denied", "permission denied"],
  [Deno.errors.IsADirectory, "invalid_file", "is a directory"],
];

/**
 * Turns an error of accessing `path` into a one-line {@link OperatorError}, looking through
 * `cause` chains (a BackendError wraps what the store's open hit). Returns null for anything
 * else: that is not the operator's to fix, so the caller rethrows it and main.ts prints a stack.
 */
export function fileAccessError(
  err: unknown,
  access: FileAccess,
  what: string,
  path: string,
): OperatorError | null {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    if (e instanceof Deno.errors.NotCapable) {
      return new OperatorError("not_capable", notCapableMessage(access, what, path), {
        cause: err,
      });
    }
    for (const [kind, code, reason] of FS_REASONS) {
      if (e instanceof kind) {
        return new OperatorError(code, `Cannot ${access} ${what} "${path}": ${reason}`, {
          cause: err,
        });
      }
    }
  }
  return null;
}

/**
 * Reads a file the operator named; `what` says its role in messages (`topic map`,
 * `listeners.tls_cert_file`). Throws {@link OperatorError} naming role and path.
 */
export async function readOperatorFile(what: string, path: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch (err) {
    throw fileAccessError(err, "read", what, path) ?? err;
  }
}

/** Reads a binary file the config names (a DER file, say), with the same one-line errors. */
export async function readOperatorBytes(what: string, path: string): Promise<Uint8Array> {
  try {
    return await Deno.readFile(path);
  } catch (err) {
    throw fileAccessError(err, "read", what, path) ?? err;
  }
}

/**
 * Whether `path` exists. Anything but "not found" (a permission wall, say) counts as existing,
 * so that the caller's own open reports it.
 */
export async function fileExists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (err) {
    return !(err instanceof Deno.errors.NotFound);
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
      throw fileAccessError(err, "read", "config file", path) ?? err;
    }
  }
  const ours: Record<string, string> = {};
  // Any letter case, so that a lower-case slip is refused rather than ignored.
  for (const [k, v] of Object.entries(env)) {
    if (k.toUpperCase().startsWith("IGGY_MQTT_")) ours[k] = v;
  }
  return loadConfig({ text, source: path, env: ours });
}

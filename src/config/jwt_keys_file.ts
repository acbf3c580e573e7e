/**
 * Reads the login-token keys the config names: the JWK set of `auth.jwt_jwks_file` and the
 * HMAC secret of `auth.jwt_hmac_secret`, imported for verification. Read at start and on every
 * SIGHUP; a file that cannot be used is one line naming it and the key, and a reload that meets
 * one keeps the previous keys.
 *
 * @module
 */
import { OperatorError } from "./errors.ts";
import { readOperatorFile } from "./files.ts";
import type { GatewayConfig } from "./types.ts";
import {
  importHmacSecret,
  importJwks,
  JwksError,
  type JwtKey,
  type JwtKeySet,
} from "../access/jwt_keys.ts";
import { parseErrorLine } from "../base/parse_error.ts";
import { utf8Length } from "../base/utf8.ts";

/** Largest JWKS file read: a hundred RSA-4096 keys fit several times over. */
export const MAX_JWKS_FILE_BYTES = 1 << 20;

/** The keys tokens may be signed with; null when neither key is configured (no token login). */
export async function readJwtKeys(auth: GatewayConfig["auth"]): Promise<JwtKeySet | null> {
  const keys: JwtKey[] = [];
  const path = auth.jwt_jwks_file;
  if (path !== "") keys.push(...(await importJwks(await readJwks(path)).catch(named(path))).keys);
  if (auth.jwt_hmac_secret !== "") keys.push(await importHmacSecret(auth.jwt_hmac_secret));
  return path === "" && auth.jwt_hmac_secret === "" ? null : { keys };
}

async function readJwks(path: string): Promise<unknown> {
  const what = "auth.jwt_jwks_file";
  // The size first, so a wrong path (a log file, say) is not read whole; a stat that fails is
  // reported by the read below, in its words.
  const size = await Deno.stat(path).then((s) => s.size, () => 0);
  const text = size > MAX_JWKS_FILE_BYTES ? "" : await readOperatorFile(what, path);
  if (size > MAX_JWKS_FILE_BYTES || utf8Length(text) > MAX_JWKS_FILE_BYTES) {
    throw new OperatorError(
      "invalid_file",
      `Cannot use ${what} "${path}": larger than ${MAX_JWKS_FILE_BYTES} bytes`,
    );
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new OperatorError(
      "invalid_file",
      `Cannot use ${what} "${path}": not JSON: ${parseErrorLine(err)}`,
    );
  }
}

function named(path: string): (err: unknown) => never {
  return (err) => {
    if (!(err instanceof JwksError)) throw err;
    throw new OperatorError(
      "invalid_file",
      `Cannot use auth.jwt_jwks_file "${path}": ${err.message}`,
      { cause: err },
    );
  };
}

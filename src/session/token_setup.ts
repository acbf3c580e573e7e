/**
 * The token login's keys read and imported, loaded by `auth.ts` from a URL built at run time only
 * when `auth.jwt_jwks_file` or `auth.jwt_hmac_secret` is set: `deno run` keeps the source of every
 * module a literal import names for the life of the process, and a gateway without token login
 * needs none of the JWT code. `deno run` needs read access to `./src` for it and what it imports (the
 * `gateway` permission sets grant it), and the compile tasks `--include` this module.
 *
 * @module
 */
import type { GatewayConfig } from "../config/types.ts";
import { readJwtKeys } from "../config/jwt_keys_file.ts";
import { TokenLogin } from "./token_login.ts";

/** The token login of `config`; null when neither key is configured. */
export async function readTokenLogin(config: GatewayConfig): Promise<TokenLogin | null> {
  return TokenLogin.of(config, await readJwtKeys(config.auth));
}

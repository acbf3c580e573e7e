import assert from "node:assert/strict";
import { loadConfig } from "../config/load.ts";
import type { ConnectPacket } from "../codec/packets.ts";
import type { LogBackend } from "../log/port.ts";
import { Authenticator } from "./auth.ts";

const ANONYMOUS = { username: null, password: null } as unknown as ConnectPacket;
/** Anonymous clients never reach the backend: a login that does fails the test. */
const NO_BACKEND: Pick<LogBackend, "authenticate" | "principalOf"> = {
  authenticate: () => Promise.reject(new Error("an anonymous login reached the backend")),
  principalOf: () => Promise.reject(new Error("an anonymous login reached the backend")),
};

function auth(permissions: string) {
  return loadConfig({
    text: "",
    source: "t",
    env: {
      IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "true",
      IGGY_MQTT_AUTH_ANONYMOUS_PERMISSIONS: permissions,
    },
  }).auth;
}

Deno.test("Authenticator gives every anonymous connection one shared, frozen principal", async () => {
  const a = new Authenticator(auth("send"), NO_BACKEND);
  const first = await a.authenticate(ANONYMOUS, "127.0.0.1");
  const second = await a.authenticate(ANONYMOUS, "127.0.0.1");
  assert.ok(first.ok && second.ok);
  assert.equal(first.principal, second.principal, "one object, not one per connection");
  assert.ok(Object.isFrozen(first.principal));
  assert.equal(first.principal.permissions.global.send_messages, true);
  assert.equal(first.principal.permissions.global.poll_messages, false);
});

Deno.test("Authenticator.reload() changes the anonymous principal of later connections", async () => {
  const a = new Authenticator(auth("send"), NO_BACKEND);
  const before = await a.authenticate(ANONYMOUS, "127.0.0.1");
  a.reload(auth("poll"));
  const after = await a.authenticate(ANONYMOUS, "127.0.0.1");
  assert.ok(before.ok && after.ok);
  assert.equal(before.principal.permissions.global.send_messages, true, "unchanged for the old");
  assert.equal(after.principal.permissions.global.send_messages, false);
  assert.equal(after.principal.permissions.global.poll_messages, true);
});

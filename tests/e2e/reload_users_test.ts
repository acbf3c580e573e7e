/**
 * Users/ACL reload (SIGHUP → Gateway.reload): the next CONNECT sees the new users, open
 * connections are kept.
 */
import assert from "node:assert/strict";
import { loadConfig } from "../../src/config/load.ts";
import { hashPassword } from "../../src/access/password.ts";
import { connectPacket, pingBarrier, RawClient, startGateway } from "../helpers/gateway.ts";

function usersToml(name: string, hash: string): string {
  return `[[users]]\nusername = "${name}"\npassword_hash = "${hash}"\n[users.permissions.global]\nsend_messages = true\n`;
}

async function connack(port: number, user: string, password: string): Promise<number> {
  const c = await RawClient.connect(port);
  await c.send(connectPacket(`c-${user}-${crypto.randomUUID()}`, { username: user, password }));
  const p = await c.readPacket(5000);
  c.close();
  return p![3];
}

Deno.test({
  name: "reload: a new user may connect, a removed one may not, and open connections stay",
  async fn() {
    const h = await hashPassword("pw", 1000);
    const env = { IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "false", IGGY_MQTT_AUTH_FAILURE_BACKOFF_MS: "0" };
    const gw = await startGateway({ toml: usersToml("alice", h), env });
    try {
      const open = await RawClient.connect(gw.port);
      await open.send(connectPacket("alice-long-lived", { username: "alice", password: "pw" }));
      assert.equal((await open.readPacket())![3], 0);
      assert.equal(await connack(gw.port, "bob", "pw"), 4);
      const next = loadConfig({
        text: usersToml("bob", h),
        source: "reload.toml",
        env: { ...env, IGGY_MQTT_MAPPING_MAP_FILE: "config/topic-map.toml" },
      });
      await gw.gateway.reload(next);
      assert.equal(await connack(gw.port, "bob", "pw"), 0);
      assert.equal(await connack(gw.port, "alice", "pw"), 4);
      assert.deepEqual(await pingBarrier(open), [], "alice's open connection is kept");
      open.close();
    } finally {
      await gw.stop();
    }
  },
});

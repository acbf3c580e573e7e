/**
 * Client ids belong to their principals (`session/client_id_owner.ts`): the attack measured
 * before the rule — bob connecting with alice's client id resumed her stored session and drained
 * its backlog, or took her live connection over — is refused, over 3.1.1 and MQTT 5, with real
 * clients (MQTT.js). Alice's backlog and her live connection are untouched.
 */
import assert from "node:assert/strict";
import mqtt from "mqtt";
import { hashPassword } from "../../src/access/password.ts";
import { startGateway, type TestGateway, waitFor } from "../helpers/gateway.ts";

/** A counter's value for one label set, from /metrics' text. */
function counter(gw: TestGateway, series: string): number {
  const line = gw.view.prometheus().split("\n")
    .find((l) => l.startsWith(series + " "));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

const opts = {};
const TOPIC = "building/north/room/42/temp";

async function usersToml(bobExtra = ""): Promise<string> {
  const h = await hashPassword("pw", 1000);
  const user = (name: string, more = "") =>
    `[[users]]\nusername = "${name}"\npassword_hash = "${h}"\n${more}` +
    `[users.permissions.global]\nsend_messages = true\npoll_messages = true\n`;
  return user("alice") + user("bob", bobExtra);
}

async function withUsers(
  fn: (gw: TestGateway) => Promise<void>,
  bobExtra = "",
  env: Record<string, string> = {},
): Promise<void> {
  const gw = await startGateway({
    toml: await usersToml(bobExtra),
    env: {
      IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "false",
      IGGY_MQTT_AUTH_FAILURE_BACKOFF_MS: "0",
      ...env,
    },
  });
  try {
    await fn(gw);
  } finally {
    await gw.stop();
  }
}

type Version = 4 | 5;

function connect(
  gw: TestGateway,
  user: string,
  clientId: string,
  version: Version,
  clean = false,
): Promise<mqtt.MqttClient> {
  return mqtt.connectAsync(`mqtt://127.0.0.1:${gw.port}`, {
    protocolVersion: version,
    clientId,
    clean,
    username: user,
    password: "pw",
    reconnectPeriod: 0,
    ...(version === 5 && !clean ? { properties: { sessionExpiryInterval: 3600 } } : {}),
  });
}

/** The CONNACK code (3.1.1 return code or MQTT 5 reason code) of a refused CONNECT; 0 if accepted. */
function refusal(
  gw: TestGateway,
  user: string,
  clientId: string,
  version: Version,
  clean: boolean,
): Promise<number> {
  return connect(gw, user, clientId, version, clean).then(
    (c) => (c.end(true), 0),
    (e) => e.code,
  );
}

for (const version of [4, 5] as const) {
  const refused = version === 5 ? 0x85 : 2;
  Deno.test({
    name: `client id ownership (MQTT ${version === 5 ? "5" : "3.1.1"}): bob reusing alice's ` +
      "client id is refused, for her stored session (clean or not), and alice then gets all 20 " +
      "messages published while she was away",
    ...opts,
    async fn() {
      await withUsers(async (gw) => {
        const alice = await connect(gw, "alice", "dev-a", version);
        await alice.subscribeAsync(TOPIC, { qos: 1 });
        await alice.endAsync();
        await waitFor(() => gw.view.storedSession("dev-a")?.offlineSinceMs != null, 5000, "off");
        const pub = await connect(gw, "bob", "bob-publisher", version, true);
        for (let i = 0; i < 20; i++) await pub.publishAsync(TOPIC, `m${i}`, { qos: 1 });
        await pub.endAsync();
        assert.equal(await refusal(gw, "bob", "dev-a", version, false), refused, "resume");
        assert.equal(await refusal(gw, "bob", "dev-a", version, true), refused, "clean start");
        assert.equal(counter(gw, 'mqtt_client_id_refused_total{reason="owned_by_another"}'), 2);
        assert.ok(
          gw.logs.some((l) => l.includes('"owner":"alice"') && l.includes('"principal":"bob"')),
          "the refusal is logged with both names",
        );
        const got: string[] = [];
        // mqtt.connect (not connectAsync): the handler is on before the backlog can arrive.
        const back = mqtt.connect(`mqtt://127.0.0.1:${gw.port}`, {
          protocolVersion: version,
          clientId: "dev-a",
          clean: false,
          username: "alice",
          password: "pw",
          reconnectPeriod: 0,
          ...(version === 5 ? { properties: { sessionExpiryInterval: 3600 } } : {}),
        });
        back.on("message", (_t, payload) => got.push(new TextDecoder().decode(payload)));
        const connack = await new Promise<mqtt.IConnackPacket>((r) => back.once("connect", r));
        assert.equal(connack.sessionPresent, true, "alice's session is still hers");
        await waitFor(() => got.length >= 20, 10_000, "alice's backlog");
        assert.deepEqual(got, Array.from({ length: 20 }, (_, i) => `m${i}`));
        await back.endAsync();
      });
    },
  });

  Deno.test({
    name: `client id ownership (MQTT ${version === 5 ? "5" : "3.1.1"}): bob cannot take over ` +
      "alice's live connection; alice may, and keeps receiving",
    ...opts,
    async fn() {
      await withUsers(async (gw) => {
        const alice = await connect(gw, "alice", "dev-a", version, true);
        await alice.subscribeAsync(TOPIC, { qos: 1 });
        let closed = false;
        alice.on("close", () => closed = true);
        assert.equal(await refusal(gw, "bob", "dev-a", version, true), refused);
        const got: string[] = [];
        alice.on("message", (_t, p) => got.push(new TextDecoder().decode(p)));
        await alice.publishAsync(TOPIC, "still here", { qos: 1 });
        await waitFor(() => got.length === 1, 5000, "alice's own message");
        assert.equal(closed, false, "alice's connection stays up");
        assert.equal(counter(gw, "mqtt_session_takeovers_total"), 0);
        const again = await connect(gw, "alice", "dev-a", version, true);
        await waitFor(() => closed, 5000, "the older connection of alice closed by her takeover");
        assert.equal(counter(gw, "mqtt_session_takeovers_total"), 1);
        await again.endAsync();
        alice.end(true);
      });
    },
  });
}

Deno.test({
  name: "client_id_pattern: auth.client_id_pattern and a [[users]] entry's own pattern refuse " +
    "other ids (CONNACK 2 / 0x85), counted",
  ...opts,
  async fn() {
    await withUsers(
      async (gw) => {
        assert.equal(await refusal(gw, "alice", "alice-1", 4, true), 0);
        assert.equal(await refusal(gw, "alice", "bob-1", 4, true), 2);
        assert.equal(await refusal(gw, "alice", "bob-1", 5, true), 0x85);
        // bob's own pattern replaces the global one.
        assert.equal(await refusal(gw, "bob", "plc.7", 4, true), 0);
        assert.equal(await refusal(gw, "bob", "bob-1", 4, true), 2);
        assert.equal(counter(gw, 'mqtt_client_id_refused_total{reason="pattern"}'), 3);
      },
      `client_id_pattern = '^plc\\.\\d+$'\n`,
      { IGGY_MQTT_AUTH_CLIENT_ID_PATTERN: "^{username}-" },
    );
  },
});

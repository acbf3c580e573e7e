/**
 * CONNECT, PINGREQ and DISCONNECT handling over in-memory transports (no sockets): the real
 * gateway, a temporary embedded store, `Gateway.accept`.
 */
import assert from "node:assert/strict";
import { connectPacket } from "../../tests/helpers/gateway.ts";
import { startMemoryGateway } from "../../tests/helpers/memory_gateway.ts";
import { keepAliveTimeoutMs } from "./connect.ts";
import type { MemoryClient } from "../../tests/helpers/memory_transport.ts";
import { hashPassword } from "../access/password.ts";

const CONNACK_ACCEPTED = [0x20, 2, 0, 0];

async function connected(c: MemoryClient, clientId: string): Promise<void> {
  c.send(connectPacket(clientId));
  assert.deepEqual([...(await c.readPacket())!], CONNACK_ACCEPTED);
}

Deno.test("keepAliveTimeoutMs() clamps 0 and values above the cap to the cap, with 1.5x grace", () => {
  assert.equal(keepAliveTimeoutMs(10, 60), 15_000);
  assert.equal(keepAliveTimeoutMs(0, 60), 90_000);
  assert.equal(keepAliveTimeoutMs(600, 60), 90_000);
});

Deno.test("CONNECT from an allowed anonymous source gets CONNACK 0; PINGREQ gets PINGRESP", async () => {
  const gw = await startMemoryGateway();
  try {
    const c = gw.open();
    await connected(c, "dev-1");
    c.send([0xc0, 0]);
    assert.deepEqual([...(await c.readPacket())!], [0xd0, 0]);
    assert.equal(gw.view.connected, 1);
  } finally {
    await gw.stop();
  }
});

Deno.test("CONNECT with an empty client id and clean session 0 gets CONNACK 2, then close", async () => {
  const gw = await startMemoryGateway();
  try {
    const c = gw.open();
    c.send(connectPacket("", { clean: false }));
    assert.deepEqual([...(await c.readPacket())!], [0x20, 2, 0, 2]);
    await c.closedByGateway();
    assert.equal(gw.view.prometheus().includes('reason="connack_2"'), true);
  } finally {
    await gw.stop();
  }
});

Deno.test("CONNECT with a wildcard in the client id gets CONNACK 2", async () => {
  const gw = await startMemoryGateway();
  try {
    const c = gw.open();
    c.send(connectPacket("dev+1"));
    assert.deepEqual([...(await c.readPacket())!], [0x20, 2, 0, 2]);
    await c.closedByGateway();
  } finally {
    await gw.stop();
  }
});

Deno.test("CONNECT with a wrong password gets CONNACK 4 and counts an auth failure", async () => {
  const h = await hashPassword("right", 1000);
  const toml = `[[users]]\nusername = "writer"\npassword_hash = "${h}"\n`;
  const gw = await startMemoryGateway({ toml, env: { IGGY_MQTT_AUTH_ALLOW_ANONYMOUS: "false" } });
  try {
    const c = gw.open();
    c.send(connectPacket("dev-1", { username: "writer", password: "wrong" }));
    assert.deepEqual([...(await c.readPacket())!], [0x20, 2, 0, 4]);
    await c.closedByGateway();
    assert.match(gw.view.prometheus(), /auth_failures\w* 1/);
  } finally {
    await gw.stop();
  }
});

Deno.test("CONNECT of protocol level 3 gets CONNACK 1, then close [MQTT-3.1.2-2]", async () => {
  const gw = await startMemoryGateway();
  try {
    const c = gw.open();
    const body = [0, 4, 0x4d, 0x51, 0x54, 0x54, 3, 0x02, 0, 60, 0, 1, 0x61];
    c.send([0x10, body.length, ...body]);
    assert.deepEqual([...(await c.readPacket())!], [0x20, 2, 0, 1]);
    await c.closedByGateway();
    assert.ok(gw.view.prometheus().includes('reason="protocol_version"'));
  } finally {
    await gw.stop();
  }
});

Deno.test("a second CONNECT with the same client id takes over: the older connection closes", async () => {
  const gw = await startMemoryGateway();
  try {
    const first = gw.open();
    await connected(first, "dev-1");
    const second = gw.open();
    await connected(second, "dev-1");
    await first.closedByGateway();
    assert.equal(second.closed, false);
    assert.equal(gw.view.connected, 1);
  } finally {
    await gw.stop();
  }
});

Deno.test("DISCONNECT closes the connection after what is queued is written", async () => {
  const gw = await startMemoryGateway();
  try {
    const c = gw.open();
    await connected(c, "dev-1");
    c.send([0xc0, 0, 0xe0, 0]);
    assert.deepEqual([...(await c.readPacket())!], [0xd0, 0]);
    assert.equal(await c.readPacket(), null);
    assert.equal(gw.view.connections, 0);
  } finally {
    await gw.stop();
  }
});

Deno.test("a first packet that is not CONNECT closes the connection without an answer", async () => {
  const gw = await startMemoryGateway();
  try {
    const c = gw.open();
    c.send([0xc0, 0]);
    assert.equal(await c.readPacket(), null);
  } finally {
    await gw.stop();
  }
});

import assert from "node:assert/strict";
import { closestName, editDistance, nearMissNames } from "./closest_key.ts";

Deno.test("editDistance() counts insertions, deletions and substitutions", () => {
  assert.equal(editDistance("", ""), 0);
  assert.equal(editDistance("tcp", "tcp"), 0);
  assert.equal(editDistance("LISTENER_TCP", "LISTENERS_TCP"), 1);
  assert.equal(editDistance("kitten", "sitting"), 3);
  assert.equal(editDistance("abc", ""), 3);
});

Deno.test("closestName() names a near miss and nothing for a far one", () => {
  const keys = [
    "IGGY_MQTT_LISTENERS_TCP",
    "IGGY_MQTT_LISTENERS_TLS",
    "IGGY_MQTT_LIMITS_MAX_PACKET_BYTES",
  ];
  assert.equal(closestName("IGGY_MQTT_LISTENER_TCP", keys), "IGGY_MQTT_LISTENERS_TCP");
  assert.equal(closestName("IGGY_MQTT_LIMITS_MAX_PACKETBYTES", keys), keys[2]);
  assert.equal(closestName("IGGY_MQTT_SOMETHING_ELSE_ENTIRELY", keys), null);
});

Deno.test("nearMissNames(thorough) has the names one slip away, never the name itself", () => {
  const near = nearMissNames("IGGY_MQTT_AUTH_TTL", true);
  for (
    const n of [
      "IGGY_MQTT_AUT_TTL",
      "IGGY_MQTT_AUTTH_TTL",
      "IGGY_MQTT_ATUH_TTL",
      "IGGY_MQTT_AUTHS_TTL",
      "IGGY_MQTT_AUTH_TTLS",
    ]
  ) {
    assert.ok(near.includes(n), n);
  }
  assert.ok(!near.includes("IGGY_MQTT_AUTH_TTL"));
  assert.ok(near.every((n) => n.startsWith("IGGY_MQTT_")));
});

Deno.test("nearMissNames() without thorough: word slips only (a plural S added or left out, an underscore left out)", () => {
  const near = nearMissNames("IGGY_MQTT_LISTENERS_TCP", false).sort();
  assert.deepEqual(near, [
    "IGGY_MQTT_LISTENERSS_TCP",
    "IGGY_MQTT_LISTENERSTCP",
    "IGGY_MQTT_LISTENERS_TCPS",
    "IGGY_MQTT_LISTENER_TCP",
  ]);
});

import assert from "node:assert/strict";
import { PacketIdSet } from "./packet_ids.ts";
import { Qos2Inbound } from "./qos2_in.ts";

Deno.test("Qos2Inbound: an id is held from its confirmed append to its PUBREL, in the session's set", () => {
  const session = new PacketIdSet();
  const q = new Qos2Inbound(session);
  assert.equal(q.arrived(7), "new");
  assert.equal(q.arrived(7), "appending", "a resend while it is appended is dropped");
  assert.equal(session.has(7), false, "not held before the log confirmed it");
  q.appended(7);
  assert.equal(session.has(7), true);
  assert.equal(q.arrived(7), "appended", "a resend now gets its PUBREC again");
  // Another connection of the same stored session sees the held id.
  assert.equal(new Qos2Inbound(session).arrived(7), "appended");
  assert.equal(q.released(7), true);
  assert.equal(q.released(7), false, "released once");
  assert.equal(q.arrived(7), "new", "the id is free again");
});

Deno.test("Qos2Inbound: a refused or failed append frees the id, so a resend is appended", () => {
  const q = new Qos2Inbound(null);
  assert.equal(q.arrived(1), "new");
  q.notAppended(1);
  assert.equal(q.arrived(1), "new");
  assert.equal(q.released(1), false, "never held: a PUBREL for it is unknown");
});

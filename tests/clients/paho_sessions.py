"""Paho (paho-mqtt 2.1.0, MQTT 3.1.1 or 5) clients for the session scenarios of the Eclipse Paho
interoperability tests, driven by tests/e2e/paho_interop_test.ts. Written for this gateway from
the scenarios' descriptions, with the topic and wildcard sets those tests use.

usage: paho_sessions.py PORT SCENARIO [VERSION]
SCENARIO: offline_queueing | overlapping | redelivery | expiry_before | expiry_after
VERSION: 3.1.1 (default: clean session 0/1) or 5 (Clean Start and a Session Expiry Interval:
3600 s for a kept session, 1 s in the expiry scenario, 0 for a clean one)
Prints one line per observation and "pass" last; exits 1 with "fail: <why>" otherwise.

The scenarios publish and subscribe at the QoS levels the Paho suite uses, QoS 2 included.
One difference: the suite's own client can stop answering PUBLISHes ("pause"); paho-mqtt always
answers a QoS 2 PUBLISH with PUBREC, so in `redelivery` the QoS 2 copy is owned by the client
before the drop, and what must come again after the reconnect is its PUBREL [MQTT-4.4.0-1].
"""
import sys
import threading
import time

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

TOPICS = ("TopicA", "TopicA/B", "Topic/C", "TopicA/C", "/TopicA")
WILDTOPICS = ("TopicA/+", "+/C", "#", "/#", "/+", "+/+", "TopicA/#")
TIMEOUT = 10

port, scenario = int(sys.argv[1]), sys.argv[2]
V5 = len(sys.argv) > 3 and sys.argv[3] == "5"


class Device:
    """One paho client with its CONNACK and the messages it received."""

    def __init__(self, client_id, clean, manual_ack=False, expiry=3600):
        self.clean = clean
        self.expiry = 0 if clean else expiry
        self.connected = threading.Event()
        self.session_present = None
        self.messages = []
        self.lock = threading.Lock()
        self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=client_id,
            clean_session=None if V5 else clean,
            protocol=mqtt.MQTTv5 if V5 else mqtt.MQTTv311,
            manual_ack=manual_ack,
        )
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.log = []
        self.client.on_log = lambda client, userdata, level, buf: self.log.append(buf)

    def _on_connect(self, client, userdata, flags, reason_code, properties):
        self.session_present = flags.session_present
        self.rc = reason_code.value
        self.connected.set()

    def _on_message(self, client, userdata, msg):
        with self.lock:
            self.messages.append((msg.topic, msg.payload.decode(), msg.qos, msg.mid))

    def connect(self):
        if V5:
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = self.expiry
            self.client.connect(
                "127.0.0.1", port, keepalive=60, clean_start=self.clean, properties=props
            )
        else:
            self.client.connect("127.0.0.1", port, keepalive=60)
        self.client.loop_start()
        if not self.connected.wait(TIMEOUT) or self.rc != 0:
            fail("no CONNACK 0")
        print(f"connack session_present={int(self.session_present)}", flush=True)
        return self

    def subscribe(self, pairs):
        done = threading.Event()
        self.client.on_subscribe = lambda *a: done.set()
        self.client.subscribe(list(pairs))
        if not done.wait(TIMEOUT):
            fail("no SUBACK")

    def publish(self, topic, payload, qos):
        self.client.publish(topic, payload, qos).wait_for_publish(TIMEOUT)

    def wait_messages(self, n, timeout=TIMEOUT):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                if len(self.messages) >= n:
                    return list(self.messages)
            time.sleep(0.01)
        with self.lock:
            return list(self.messages)

    def barrier(self):
        """A publish to a private topic this client subscribed to: everything before it arrived."""
        topic = f"barrier/{self.client._client_id.decode()}/{time.time_ns()}"
        got = threading.Event()
        self.client.message_callback_add(topic, lambda *a: got.set())
        self.subscribe([(topic, 0)])
        self.publish(topic, "b", 0)
        if not got.wait(TIMEOUT):
            fail("barrier message did not arrive")

    def disconnect(self):
        self.client.disconnect()
        self.client.loop_stop()

    def drop(self):
        """Ends the connection without DISCONNECT (as a device losing its network)."""
        self.client.loop_stop()
        self.client.socket().close()


def fail(why):
    print(f"fail: {why}", flush=True)
    sys.exit(1)


def offline_queueing():
    # Paho: a clean-session-0 subscriber disconnects; messages published meanwhile are
    # delivered when it reconnects (QoS 0 ones may be dropped).
    a = Device("myclientid", clean=False).connect()
    a.subscribe([(WILDTOPICS[5], 2)])
    a.disconnect()
    b = Device("myclientid2", clean=True).connect()
    b.publish(TOPICS[1], "qos 0", 0)
    b.publish(TOPICS[2], "qos 1", 1)
    b.publish(TOPICS[3], "qos 2", 2)
    b.disconnect()
    a = Device("myclientid", clean=False).connect()
    if not a.session_present:
        fail("session present 0 after reconnect")
    got = a.wait_messages(3)
    print("received", sorted(p for _, p, _, _ in got), flush=True)
    if len(got) not in (2, 3) or not {"qos 1", "qos 2"} <= {p for _, p, _, _ in got}:
        fail(f"expected 2 or 3 queued messages, got {got}")
    a.disconnect()


def overlapping():
    # Paho: two overlapping filters; one message matching both is received once or twice, at
    # the higher QoS. This gateway delivers it once [MQTT-3.3.5-1].
    a = Device("myclientid", clean=True).connect()
    a.subscribe([(WILDTOPICS[6], 2), (WILDTOPICS[0], 1)])
    a.publish(TOPICS[3], "overlapping topic filters", 2)
    got = a.wait_messages(1)
    a.barrier()
    got = [m for m in a.messages if not m[0].startswith("barrier/")]
    print("received", [(t, q) for t, _, q, _ in got], flush=True)
    if len(got) != 1 or got[0][2] != 2:
        fail(f"expected one copy at QoS 2, got {got}")
    a.disconnect()


def redelivery():
    # Paho: QoS 1 and 2 exchanges not completed are taken up again after a reconnect with clean
    # session 0: the unacknowledged QoS 1 PUBLISH comes again, and so does the PUBREL of the
    # QoS 2 copy the client PUBRECed but did not PUBCOMP (manual_ack withholds the PUBCOMP).
    a = Device("myclientid", clean=False, manual_ack=True).connect()
    a.subscribe([(WILDTOPICS[6], 2)])
    b = Device("myclientid2", clean=True).connect()
    b.publish(TOPICS[1], "", 1)
    b.publish(TOPICS[3], "", 2)
    b.disconnect()
    first = a.wait_messages(2)
    if sorted((t, q) for t, _, q, _ in first) != sorted([(TOPICS[1], 1), (TOPICS[3], 2)]):
        fail(f"expected the QoS 1 and the QoS 2 message before the drop, got {first}")
    qos2_mid = next(m for t, _, q, m in first if q == 2)
    a.drop()  # neither PUBACK nor PUBCOMP sent
    a = Device("myclientid", clean=False).connect()
    if not a.session_present:
        fail("session present 0 after reconnect")
    got = a.wait_messages(1)
    a.barrier()
    got = [m for m in a.messages if not m[0].startswith("barrier/")]
    print("redelivered", sorted((t, q) for t, _, q, _ in got), flush=True)
    if [(t, q) for t, _, q, _ in got] != [(TOPICS[1], 1)]:
        fail(f"expected the QoS 1 message again and nothing else, got {got}")
    if f"Received PUBREL (Mid: {qos2_mid})" not in a.log:
        fail(f"no PUBREL {qos2_mid} after the reconnect: {a.log}")
    print(f"pubrel {qos2_mid} again", flush=True)
    a.disconnect()


def expiry_before():
    a = Device("expiring", clean=False, expiry=1).connect()
    a.subscribe([(WILDTOPICS[0], 1)])
    a.disconnect()


def expiry_after():
    # The test waited until the gateway's session.expiry_s had removed the session.
    b = Device("publisher", clean=True).connect()
    b.publish(TOPICS[1], "after expiry", 1)
    b.disconnect()
    a = Device("expiring", clean=False, expiry=1).connect()
    if a.session_present:
        fail("session present 1 after the session expired")
    a.barrier()
    got = [m for m in a.messages if not m[0].startswith("barrier/")]
    if got:
        fail(f"an expired session received {got}")
    a.disconnect()


SCENARIOS = {
    "offline_queueing": offline_queueing,
    "overlapping": overlapping,
    "redelivery": redelivery,
    "expiry_before": expiry_before,
    "expiry_after": expiry_after,
}
SCENARIOS[scenario]()
print("pass", flush=True)

"""Paho (paho-mqtt 2.1.0) subscribers with stored sessions for the many-gateways soak
(tests/soak/many_gateways.ts), all in one process: each connects through the load balancer
without a clean start (MQTT 5: Session Expiry Interval 3600 s), subscribes once at QoS 1, and from
then on reconnects at random (and, through Paho's own reconnect, whenever a gateway ends its
connection), never subscribing again: its stored session must carry the subscription.

usage: paho_soak.py PORT MEAN_RECONNECT_S CLIENT_ID,VERSION,FILTER ...
VERSION: 3.1.1 or 5. Prints "subscribed <id>" once per client, "msg <id> <payload>" per message,
"lost <id>" when a reconnect finds no session, "told <id> <reason code> <server reference>" when
an MQTT 5 server ends a connection; on "stop" (or end of input) on stdin it disconnects every
client and prints "done".
"""
import random
import sys
import threading
import time

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

port, mean = int(sys.argv[1]), float(sys.argv[2])
out = threading.Lock()


def say(line):
    with out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Subscriber:
    """One stored-session subscriber; `client` is replaced on each reconnect of its own."""

    def __init__(self, client_id, version, topic_filter):
        self.id, self.v5, self.filter = client_id, version == "5", topic_filter
        self.subscribed = False
        self.client = None

    def connect(self):
        c = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=self.id,
            clean_session=None if self.v5 else False,
            protocol=mqtt.MQTTv5 if self.v5 else mqtt.MQTTv311,
        )
        c.reconnect_delay_set(min_delay=0.1, max_delay=1)
        c.on_connect = self.on_connect
        c.on_subscribe = lambda *a: self.on_subscribe()
        c.on_message = lambda client, userdata, msg: say(f"msg {self.id} {msg.payload.decode()}")
        c.on_disconnect = self.on_disconnect
        props = None
        if self.v5:
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = 3600
        self.client = c
        c.connect_async("127.0.0.1", port, keepalive=20, clean_start=False, properties=props)
        c.loop_start()

    def on_connect(self, client, userdata, flags, reason_code, properties):
        if reason_code.value != 0:
            return
        if not self.subscribed:
            client.subscribe(self.filter, qos=1)
        elif not flags.session_present:
            say(f"lost {self.id}")

    def on_subscribe(self):
        if not self.subscribed:
            self.subscribed = True
            say(f"subscribed {self.id}")

    def on_disconnect(self, client, userdata, flags, reason_code, properties):
        if self.v5 and flags.is_disconnect_packet_from_server:
            ref = getattr(properties, "ServerReference", "-") if properties else "-"
            say(f"told {self.id} {reason_code.value} {ref}")

    def reconnect(self):
        old = self.client
        old.disconnect()
        old.loop_stop()
        time.sleep(random.uniform(0, 0.5))
        self.connect()


subs = [Subscriber(*spec.split(",", 2)) for spec in sys.argv[3:]]
for s in subs:
    s.connect()
stopping = threading.Event()


def churn():
    while not stopping.wait(random.expovariate(len(subs) / mean)):
        s = random.choice(subs)
        if s.subscribed:
            s.reconnect()


threading.Thread(target=churn, daemon=True).start()
for line in sys.stdin:
    if line.strip() == "stop":
        break
stopping.set()
for s in subs:
    s.client.disconnect()
    s.client.loop_stop()
say("done")

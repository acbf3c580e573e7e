"""An MQTT 5 paho-mqtt subscriber that acknowledges only when told, driven by
tests/e2e/mqtt5_delivery_test.ts (Receive Maximum, message expiry).

usage: paho5_subscriber.py PORT CLIENT_ID TOPIC RECEIVE_MAXIMUM [SESSION_EXPIRY_S]
With SESSION_EXPIRY_S it connects with Clean Start 0 and that Session Expiry Interval (a stored
session), else with Clean Start 1.
Prints "connack <code>", "suback <code>", then "msg <payload> <expiry or -> <sub ids>" per PUBLISH.
Reads commands on stdin: "ack" acknowledges every message received so far; "quit" exits
without acknowledging what is left (the socket is closed).
"""
import select
import sys

import paho.mqtt.client as mqtt
from paho.mqtt.properties import Properties
from paho.mqtt.packettypes import PacketTypes

port, client_id, topic, receive_max = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
session_expiry = int(sys.argv[5]) if len(sys.argv) > 5 else None
unacked = []

client = mqtt.Client(
    mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5, manual_ack=True
)


def on_connect(c, u, flags, rc, props):
    print("connack", rc.value, flush=True)
    c.subscribe(topic, qos=1)


def on_subscribe(c, u, mid, codes, props):
    print("suback", codes[0].value, flush=True)


def on_message(c, u, m):
    expiry = getattr(m.properties, "MessageExpiryInterval", "-")
    unacked.append(m.mid)
    print("msg", m.payload.decode(), expiry, flush=True)


client.on_connect = on_connect
client.on_subscribe = on_subscribe
client.on_message = on_message
props = Properties(PacketTypes.CONNECT)
props.ReceiveMaximum = receive_max
if session_expiry is not None:
    props.SessionExpiryInterval = session_expiry
client.connect(
    "127.0.0.1", port, keepalive=60, clean_start=session_expiry is None, properties=props
)
while True:
    client.loop(timeout=0.05)
    if select.select([sys.stdin], [], [], 0)[0]:
        line = sys.stdin.readline().strip()
        if line == "ack":
            for mid in unacked:
                client.ack(mid, 1)
            unacked.clear()
        elif line in ("quit", ""):
            sock = client.socket()
            if sock:
                sock.close()
            break
print("done", flush=True)

"""A paho-mqtt device with a will, driven by the will tests (tests/e2e/will_test.ts).

usage: paho_will.py PORT CLIENT_ID WILL_TOPIC MODE [USERNAME PASSWORD]
MODE: reset       connect, then reset the socket (SO_LINGER 0: the kernel sends RST)
      disconnect  connect, then a clean DISCONNECT
      connack     connect and print the CONNACK code only
Prints "connack <code>" once the CONNACK arrived, then "done".
"""
import socket
import struct
import sys
import time

import paho.mqtt.client as mqtt

port, client_id, will_topic, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
result = {}

client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv311)
if len(sys.argv) > 6:
    client.username_pw_set(sys.argv[5], sys.argv[6])
client.will_set(will_topic, payload=b"offline", qos=1, retain=True)
client.on_connect = lambda c, u, flags, rc, props: result.setdefault("rc", rc.value)
client.connect("127.0.0.1", port, keepalive=60)
deadline = time.time() + 10
while "rc" not in result and time.time() < deadline:
    client.loop(timeout=0.1)
print("connack", result.get("rc", "none"), flush=True)
if mode == "reset" and result.get("rc") == 0:
    sock = client.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
elif mode == "disconnect" and result.get("rc") == 0:
    client.disconnect()
    client.loop(timeout=0.5)
print("done", flush=True)

"""A Paho (paho-mqtt 2.1.0) subscriber with a stored session whose gateway stops, driven by
tests/e2e/handover_test.ts: it subscribes to sensors/+/data at QoS 1 through one gateway, and when
the server ends the connection it reconnects, without a clean start, to the Server Reference the
MQTT 5 DISCONNECT named (MQTT 3.1.1: to FALLBACK_PORT, as a client behind a balancer would), and
keeps receiving until it has every payload m0 .. m(COUNT-1) at least once.

usage: paho_handover.py PORT FALLBACK_PORT VERSION CLIENT_ID COUNT
VERSION: 3.1.1 or 5. Prints "subscribed", "disconnect <reason code> <server reference or ->",
"connack session_present=<0|1>" after the reconnect, then "complete" (or "fail: <why>", exit 1).
"""
import sys
import threading

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

port, fallback, version, client_id, count = (
    int(sys.argv[1]),
    int(sys.argv[2]),
    sys.argv[3],
    sys.argv[4],
    int(sys.argv[5]),
)
V5 = version == "5"
TIMEOUT = 30

got = set()
lock = threading.Lock()
complete = threading.Event()
connected = threading.Event()
ended = threading.Event()
state = {"reference": None, "present": None}


def on_connect(client, userdata, flags, reason_code, properties):
    state["present"] = int(flags.session_present)
    connected.set()


def on_message(client, userdata, msg):
    with lock:
        got.add(msg.payload.decode())
        if len(got) >= count:
            complete.set()


def on_disconnect(client, userdata, flags, reason_code, properties):
    ref = getattr(properties, "ServerReference", None) if properties is not None else None
    state["reference"] = ref
    code = reason_code.value if V5 else "-"
    print(f"disconnect {code} {ref or '-'}", flush=True)
    ended.set()


def fail(why):
    print(f"fail: {why}", flush=True)
    sys.exit(1)


def start(p):
    client = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2,
        client_id=client_id,
        clean_session=None if V5 else False,
        protocol=mqtt.MQTTv5 if V5 else mqtt.MQTTv311,
    )
    client.on_connect = on_connect
    client.on_message = on_message
    client.on_disconnect = on_disconnect
    connected.clear()
    if V5:
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 3600
        client.connect("127.0.0.1", p, keepalive=60, clean_start=False, properties=props)
    else:
        client.connect("127.0.0.1", p, keepalive=60)
    client.loop_start()
    if not connected.wait(TIMEOUT):
        fail(f"no CONNACK from port {p}")
    return client


first = start(port)
done = threading.Event()
first.on_subscribe = lambda *a: done.set()
first.subscribe("sensors/+/data", qos=1)
if not done.wait(TIMEOUT):
    fail("no SUBACK")
print("subscribed", flush=True)
if not ended.wait(TIMEOUT * 2):
    fail("the gateway never ended the connection")
first.loop_stop()
ref = state["reference"]
second = start(int(ref.rsplit(":", 1)[1]) if ref else fallback)
print(f"connack session_present={state['present']}", flush=True)
if not complete.wait(TIMEOUT):
    missing = sorted(set(f"m{i}" for i in range(count)) - got)
    fail(f"missing {len(missing)}: {missing[:10]}")
second.on_disconnect = None
second.disconnect()
second.loop_stop()
print("complete", flush=True)

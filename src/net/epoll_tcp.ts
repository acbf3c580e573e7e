/**
 * The TCP listener on the epoll layer, loaded from a URL built at run time by `listeners.ts`
 * only when the layer may be used (Linux, FFI granted): `deno run` keeps the source of every
 * module a literal import names, and the default permission set grants no FFI.
 *
 * @module
 */
import { bindError } from "./bind_error.ts";
import { bindableIp, EpollListener } from "./_epoll_listener.ts";
import { addressOf, openLibc, sockaddrOf } from "./_libc.ts";
import type { AcceptHandler, MqttListener } from "./mqtt_listener.ts";

/** Why the epoll layer cannot take a listener: libc cannot be opened, the host is no IP. */
export interface EpollUnusable {
  readonly reason: string;
}

/**
 * Binds `hostname:port` on the epoll layer; `onShed` counts a connection closed at once for want
 * of file descriptors. Resolves with {@link EpollUnusable} when the layer cannot take it (the
 * caller falls back or refuses); rejects when the address cannot be bound.
 */
export function listenEpoll(
  hostname: string,
  port: number,
  onShed: () => void,
  onAccept: AcceptHandler,
): Promise<MqttListener | EpollUnusable> {
  const opened = openLibc();
  if ("reason" in opened) return Promise.resolve(opened);
  const ip = bindableIp(hostname);
  if (ip === null) return Promise.resolve({ reason: `"${hostname}" is not an IP` });
  try {
    const l = new EpollListener(opened.libc, ip, port, { accept: onAccept, shed: onShed });
    return Promise.resolve({
      kind: "tcp",
      layer: "epoll",
      hostname: addressOf(sockaddrOf(ip, 0)),
      port: l.port,
      close: () => l.close(),
    });
  } catch (err) {
    return Promise.reject(bindError("MQTT listener", hostname, port, err));
  }
}

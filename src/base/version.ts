/** The gateway's version (`--version`, the status page). */
export const GATEWAY_VERSION = "0.1.0";

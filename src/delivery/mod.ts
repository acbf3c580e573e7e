/**
 * Delivery: shared readers per triple, the router, bounded client queues, the ACK ledger.
 *
 * @module
 */
export { Delivery, type DeliveryOptions } from "./delivery.ts";
export { AckLedger } from "./ledger.ts";
export { SubscriptionRegistry, type Triple, tripleKey } from "./registry.ts";

export { EgressProxy, isPrivateAddress, type EgressProxyOptions } from './egress-proxy';
export { compileAllow, matchAllow, normaliseHost, type AllowRule } from './allow-match';
export type { EgressAttempt, EgressAuditRecords } from './audit';
export { egressPort, EGRESS_ENTRY, type EgressStore } from './egress-port';

export { EgressProxy, isPrivateAddress, type EgressProxyOptions } from './egress-proxy';
export { compileAllow, matchAllow, normaliseHost, type AllowRule } from './allow-match';
export { isNetworkAttempt, summariseEgress, type EgressAttempt, type EgressAuditRecords } from './audit';
export { egressPort, EGRESS_ENTRY, EGRESS_STARTED, type EgressStore } from './egress-port';

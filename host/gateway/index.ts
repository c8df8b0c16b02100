export { ModelGateway, type ModelGatewayOptions, type GatewayRefusal } from './model-gateway';
export { storeLedger, GATEWAY_ENTRY, type GatewayLedger, type GatewayEntryKind, type GatewayRunOf, type GatewayStore } from './ledger';
export { usageOf, type GatewayUsage } from './usage';
export { providerKey } from './provider-key';
export { nodeReply, readNodeRequest, type GatewayReply, type GatewayRequest, type ProxiedGateway } from './exchange';
export { KeptConnections, type Exchange, type ExchangeSink } from './kept-connections';
export { KeyMask } from './key-mask';

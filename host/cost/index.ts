export { runCost, costOfRun, addCost, divideCost, emptyCost, type RunCost, type TokenCount } from './run-cost';
export { costReport, type CostReport } from './cost-report';
export { PriceTableSchema, HostConfigSchema, loadHostConfig, priceOf, type PriceTable, type HostConfig } from './price-table';

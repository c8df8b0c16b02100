import { existsSync, readFileSync } from 'node:fs';
import { z } from 'zod';
import { parseWithSchema } from '../../environment';
import { BerthError } from '../errors';
import type { RunCost } from './run-cost';

const price = z.number().nonnegative();
const TokenPriceSchema = z.strictObject({
  /** Per 1,000 prompt tokens not served from the cache. */
  prompt: price,
  /** Per 1,000 completion tokens. */
  completion: price,
  /** Per 1,000 cached prompt tokens; default: the prompt price. */
  cached: price.optional(),
});

/** Prices for `berth cost`: money per unit, in one currency. Everything left out costs nothing. */
export const PriceTableSchema = z.strictObject({
  currency: z.string().min(1).default('USD'),
  /** By model name as the endpoint reports it; `default` prices any other model. */
  tokens: z.record(z.string(), TokenPriceSchema).default({}),
  perCpuHour: price.default(0),
  /** Sandbox memory in use, per GB-hour. */
  perMemoryGbHour: price.default(0),
  /** Stored snapshots, per GB-month. */
  perGbMonth: price.default(0),
});
export type PriceTable = z.infer<typeof PriceTableSchema>;

/** The host config file: what `berth cost` prices with. More host settings may join it. */
export const HostConfigSchema = z.strictObject({ prices: PriceTableSchema.optional() });
export type HostConfig = z.infer<typeof HostConfigSchema>;

/**
 * Reads the host config (YAML or JSON). Absent: no prices (`config_not_found` when `required`, i.e.
 * named explicitly). Invalid: `manifest_invalid` with one
 * `path: expected X, found Y` line per bad field (`prices.perCpuHour: expected number, …`).
 */
export function loadHostConfig(path: string, required: boolean): HostConfig {
  if (!existsSync(path)) {
    if (!required) return {};
    throw new BerthError('config_not_found', `no host config at ${path} (named by --config or $BERTH_CONFIG)`, { details: { path } });
  }
  return parseWithSchema(HostConfigSchema, readFileSync(path, 'utf8'), path, 'host config');
}

/** What `cost` costs at these prices, and each part. */
export function priceOf(c: RunCost, p: PriceTable): { total: number; tokens: number; cpu: number; memory: number; storage: number } {
  let tokens = 0;
  for (const [model, t] of Object.entries(c.tokens)) {
    const tp = p.tokens[model] ?? p.tokens.default;
    if (!tp) continue;
    const cached = Math.min(t.cached, t.prompt);
    tokens += ((t.prompt - cached) * tp.prompt + cached * (tp.cached ?? tp.prompt) + t.completion * tp.completion) / 1000;
  }
  const cpu = (c.cpuSeconds / 3600) * p.perCpuHour;
  const memory = (c.memoryGbSeconds / 3600) * p.perMemoryGbHour;
  const storage = c.snapshotGbMonths * p.perGbMonth;
  return { total: tokens + cpu + memory + storage, tokens, cpu, memory, storage };
}

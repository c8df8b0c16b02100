import type { HostRuntime } from '../runtime/host-runtime';
import { hostRuntime, type RuntimeOptions } from '../api/runtime';
import type { CliContext } from './context';

export type CliRuntimeOptions = RuntimeOptions;

/** The host API's one runtime (host/api/runtime.ts) over the command's parts. */
export function cliRuntime(ctx: CliContext, o: RuntimeOptions): HostRuntime {
  return hostRuntime(ctx, o);
}

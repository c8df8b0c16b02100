import type { Environment } from '../../environment';

/** Tools whose commands use the network; the others only read and write workspace files. */
const COMMAND_TOOLS = new Set(['exec']);

/**
 * What the model is told about the sandbox's network, in the description of tools that run
 * commands: it plans better knowing that a download will be refused, and which names it may use.
 */
export function networkHint(env: Environment, tool: string): string {
  if (!COMMAND_TOOLS.has(tool)) return '';
  const { mode, allow } = env.network;
  if (mode === 'none') return ' The sandbox has no network.';
  if (mode === 'allowlist') {
    return ` The sandbox reaches only ${allow.join(', ') || 'nothing'} (host:port), through the HTTP proxy already set in http_proxy/https_proxy; every other address is refused, and there is no DNS.`;
  }
  return ` The sandbox reaches outside hosts directly${allow.length ? `; of the host machine, only ${allow.join(', ')}` : ''}.`;
}

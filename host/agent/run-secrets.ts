import type { Environment } from '../../environment';
import type { ErrorIds } from '../errors';
import { checkSecretTargets, hostSecretSource, resolveSecrets, type ResolvedSecret, type SecretSource } from '../secrets';

/**
 * The secrets of an agent run: every declared secret given to at least one tool. Each tool's
 * output is scrubbed of all of them, not only of those it is given, because a granted command
 * can leave a value in a workspace file that `read_file` or `search` returns later.
 */
export function runSecretNames(env: Environment): string[] {
  return env.secrets.filter((s) => s.to.length > 0).map((s) => s.name);
}

/** One use of a tool's view of the run's secrets, read just now and dropped after the use. */
export interface ToolSecrets {
  /** Exposed to the tool's commands (env or tmpfs file), as the manifest says. */
  granted: ResolvedSecret[];
  /** Everything the tool returns is scrubbed of these. */
  all: ResolvedSecret[];
}

/**
 * Reads the run's secrets for one use of `tool`. A secret that cannot be read is a
 * `secret_unavailable` error naming it and its source: without every value the output could not
 * be scrubbed, so no tool runs, granted or not.
 */
export async function resolveToolSecrets(env: Environment, tool: string, ids: ErrorIds, source: SecretSource = hostSecretSource): Promise<ToolSecrets> {
  const names = runSecretNames(env);
  if (names.length === 0) return { granted: [], all: [] };
  const all = await resolveSecrets(env.secrets, names, ids, source);
  const to = new Map(env.secrets.map((d) => [d.name, d.to]));
  return { granted: all.filter((s) => to.get(s.name)!.includes(tool)), all };
}

/**
 * Refuses, before anything is submitted, an agent run whose manifest gives a secret to a name that
 * is not one of the host's tools (`manifest_invalid`, naming `secrets.N.to.M`), or whose secrets
 * cannot be read on this host now (`secret_unavailable`). The values read are dropped at once;
 * each tool call reads them again.
 */
export async function checkAgentSecrets(env: Environment, toolNames: readonly string[], file: string, source: SecretSource = hostSecretSource): Promise<void> {
  checkSecretTargets(env.secrets, { noun: 'tool', names: toolNames }, file);
  await resolveSecrets(env.secrets, runSecretNames(env), {}, source);
}

/**
 * What the model is told about a tool's secrets: their names and how its commands find them, so
 * it can use them without being told the values (which it never sees: output is scrubbed).
 */
export function secretHint(env: Environment, tool: string): string {
  const granted = env.secrets.filter((s) => s.to.includes(tool));
  if (granted.length === 0) return '';
  const how = granted.map((s) => (s.expose === 'env' ? `$${s.name} (environment variable)` : `$${s.name}_FILE (path of a file holding ${s.name})`));
  return ` Secrets given to its commands: ${how.join(', ')}. Their values never appear in output: they are replaced by [redacted:NAME].`;
}

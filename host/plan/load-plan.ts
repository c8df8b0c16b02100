import { realpath, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { BerthError } from '../errors';
import { checkEgressPolicy, checkSupported, fingerprint, loadEnvironment, parseWithSchema, readInputFile, requireLocked, type Environment } from '../../environment';
import { PlanSchema, type Plan } from './plan-schema';
import { checkSecretGrants } from '../secrets';
import { scanHostDir } from '../sandbox';

/** A plan with its paths resolved and its environment loaded, validated and pinned. */
export interface LoadedPlan {
  file: string;
  plan: Plan;
  environmentFile: string;
  environment: Environment;
  envFingerprint: string;
  /** Absolute host directory to upload, when the plan names one. */
  workspaceDir: string | null;
}

/** Reads a plan file and everything it refers to; each error names the file and field at fault. */
export async function loadPlan(file: string): Promise<LoadedPlan> {
  const path = resolve(file);
  const text = await readInputFile(path, 'plan', file, 'plan');
  const plan = parseWithSchema(PlanSchema, text, file, 'plan');
  const base = dirname(path);
  const environmentFile = resolve(base, plan.environment);
  const environment = await loadEnvironment(environmentFile);
  checkSupported(environment);
  await checkEgressPolicy(environment);
  requireLocked(environment);
  checkSecretGrants(environment.secrets, plan.steps.map((s) => ({ kind: 'step' as const, name: s.name, secrets: s.secrets })), file);
  let workspaceDir: string | null = null;
  if (plan.workspace) {
    const named = resolve(base, plan.workspace);
    const info = await stat(named).catch(() => null);
    if (!info?.isDirectory()) {
      throw new BerthError('plan_invalid', `${file}: workspace: expected a directory, found ${info ? 'a file' : 'nothing'} at ${named}`, { details: { file, path: 'workspace' } });
    }
    // The plan's author names the directory, through a link if they like (current -> releases/7):
    // the run records and uploads the directory itself. Links inside it stay confined to it.
    workspaceDir = await realpath(named);
    // The walk the upload does, done now: a symlink leaving the directory (path_escape) is refused
    // before anything is submitted or leased. The upload walks again and refuses one made since.
    await scanHostDir(workspaceDir);
  }
  return { file: path, plan, environmentFile, environment, envFingerprint: fingerprint(environment), workspaceDir };
}

import type Dockerode from 'dockerode';
import type { Environment } from '../../environment';
import { BerthError, isBerthError } from '../errors';
import { assertImagePresent, resolveImageDigest } from '../sandbox';
import { resolveSecrets } from '../secrets';
import type { LoadedPlan } from '../plan';

/**
 * What can be checked before a run exists, checked: the pinned image is on this engine. A run
 * created first would only fail later, deep in its first phase; here the operator gets the fix.
 */
export async function checkImageOnEngine(docker: Dockerode, env: Environment & { image: { digest: string } }, envFile: string): Promise<void> {
  const { ref, digest } = env.image;
  try {
    await assertImagePresent(docker, digest, ref);
    return;
  } catch (err) {
    if (!isBerthError(err, 'image_missing')) throw err;
  }
  const local = await resolveImageDigest(docker, ref).catch((err: unknown) => {
    if (isBerthError(err, 'image_missing')) return null;
    throw err;
  });
  const fix = local
    ? `the local ${ref} is ${local}: pin it with  berth env lock ${envFile}`
    : `${ref} is not on this engine either: build it (berth/* images: npm run images), then  berth env lock ${envFile}`;
  throw new BerthError('image_missing', `${envFile} pins image ${digest} (${ref}), which is not on this Docker engine; ${fix}`, {
    details: { file: envFile, imageRef: ref, imageDigest: digest, localImageId: local },
  });
}

/**
 * Every secret the plan's steps use can be read on this host now (the values are read and
 * dropped; each step reads them again when it runs), so a missing variable fails the command,
 * not step N after steps 1..N-1 ran.
 */
export async function checkPlanSecrets(loaded: LoadedPlan): Promise<void> {
  const names = [...new Set(loaded.plan.steps.flatMap((s) => s.secrets))];
  if (names.length) await resolveSecrets(loaded.environment.secrets, names);
}

import { readFile, writeFile } from 'node:fs/promises';
import { checkEgressPolicy, checkSupported, fingerprint, loadEnvironment, lockFileFor, lockFileText, networkRunRecords, parseEnvironment, requireLocked, withImageDigest } from '../../../environment';
import { checkImageOnEngine } from './preflight';
import { resolveImageDigest } from '../../sandbox';
import type Dockerode from 'dockerode';
import { emit } from '../output';

/** `berth env validate FILE [--engine]`: exit 0 and the fingerprint when valid; the named problems otherwise. */
export async function envValidate(file: string, json: boolean, docker?: Dockerode): Promise<number> {
  const env = await loadEnvironment(file);
  checkSupported(env);
  const accepted = await checkEgressPolicy(env);
  // --engine: the pinned image must be on this engine (what berth run and berth agent check first).
  if (docker) {
    requireLocked(env);
    await checkImageOnEngine(docker, env, file);
  }
  const fp = fingerprint(env);
  // What every run of this environment will record about its network, said up front.
  const network = networkRunRecords(env, accepted);
  const notes = network.flatMap((r) =>
    r.kind === 'egress.open'
      ? ['network: open (outside hosts reachable, not audited; recorded on every run)']
      : (r.body.risks ?? []).map((k) => `network.allowOverride accepts ${k.pattern}: ${k.why}`),
  );
  emit(json, { file, valid: true, fingerprint: fp, locked: Boolean(env.image.digest), image: env.image, network, ...(docker ? { imageOnEngine: true } : {}) }, () =>
    [`${file}: valid${docker ? ' (image present on this engine)' : ''}`, `fingerprint ${fp}`, env.image.digest ? `image ${env.image.ref} @ ${env.image.digest}` : `image ${env.image.ref} is not locked yet: run berth env lock ${file}`, ...notes].join('\n'),
  );
  return 0;
}

/**
 * `berth env lock FILE`: pins the image to the id of the local image `image.ref`. The pin goes to
 * the lock file beside the manifest (`env.lock.json`), leaving the manifest as written; a manifest
 * that already pins `image.digest` itself has that line updated instead, keeping its comments.
 */
export async function envLock(file: string, json: boolean, docker: Dockerode): Promise<number> {
  // Loaded first: a missing, unreadable or invalid manifest is named as berth env validate names it.
  const env = await loadEnvironment(file);
  const text = await readFile(file, 'utf8');
  const inline = parseEnvironment(text, file).image.digest !== undefined;
  const digest = await resolveImageDigest(docker, env.image.ref);
  const before = env.image.digest;
  const target = inline ? file : lockFileFor(file);
  if (before !== digest) await writeFile(target, inline ? withImageDigest(text, file, digest) : lockFileText(env.image.ref, digest));
  const locked = await loadEnvironment(file);
  emit(json, { file, lockFile: inline ? null : target, image: locked.image, changed: before !== digest, fingerprint: fingerprint(locked) }, () =>
    before === digest ? `${file}: already locked to ${digest} (in ${target})` : `${file}: locked ${env.image.ref} to ${digest} in ${target}${before ? ` (was ${before})` : ''}`,
  );
  return 0;
}

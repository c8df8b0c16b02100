import { execa } from 'execa';

/**
 * The few Docker engine operations the image build needs, through the docker CLI so that the
 * build script works wherever `docker` does (the host's Docker adapter lives in host/sandbox).
 */
export async function findImageByLabels(labels: Record<string, string>, signal: AbortSignal): Promise<string | undefined> {
  const filters = Object.entries(labels).flatMap(([k, v]) => ['--filter', `label=${k}=${v}`]);
  const { stdout } = await execa('docker', ['image', 'ls', '--quiet', '--no-trunc', ...filters], { cancelSignal: signal });
  const ids = [...new Set(stdout.split('\n').map((l) => l.trim()).filter((l) => l.startsWith('sha256:')))];
  if (ids.length === 0) return undefined;
  // Images committed from a container of ours (snapshots) inherit these labels; only a loaded
  // build has no parent layer and no snapshot label.
  for (const id of ids) {
    // One at a time: a snapshot image may be removed between the listing and this look.
    const r = await execa('docker', ['image', 'inspect', '--format', '{{.Id}} {{index .Config.Labels "berth.snapshot"}} {{len .RootFS.Layers}}', id], { cancelSignal: signal, reject: false });
    const f = r.stdout.trim().split(' ');
    if (r.exitCode === 0 && f.length === 3 && f[1] === '' && f[2] === '1') return f[0];
  }
  return undefined;
}

/** Streams a docker-archive directory into `docker load` and returns the id Docker reports. */
export async function loadArchiveDir(dir: string, signal: AbortSignal): Promise<string> {
  const tar = execa('tar', ['--create', `--directory=${dir}`, '--sort=name', '--numeric-owner', '.'], { cancelSignal: signal, buffer: false });
  const load = execa('docker', ['load'], { cancelSignal: signal });
  tar.stdout.pipe(load.stdin);
  const [, loaded] = await Promise.all([tar, load]);
  const match = /sha256:[0-9a-f]{64}/.exec(loaded.stdout);
  if (!match) throw new Error(`docker load printed no image id: ${loaded.stdout}`);
  return match[0];
}

export async function tagImage(imageId: string, tag: string, signal: AbortSignal): Promise<void> {
  await execa('docker', ['tag', imageId, tag], { cancelSignal: signal });
}

import { execa } from 'execa';

/**
 * The few Docker engine operations the image build needs, through the docker CLI so that the
 * build script works wherever `docker` does (the host's Docker adapter lives in host/sandbox).
 */
export async function findImageByLabels(labels: Record<string, string>, signal: AbortSignal): Promise<string | undefined> {
  const filters = Object.entries(labels).flatMap(([k, v]) => ['--filter', `label=${k}=${v}`]);
  const { stdout } = await execa('docker', ['image', 'ls', '--no-trunc', '--format', '{{.ID}}\t{{.Repository}}', ...filters], { cancelSignal: signal });
  // Snapshots committed from containers of ours inherit these labels; they live in berth-snapshot.
  const ids = [...new Set(stdout.split('\n').map((l) => l.trim().split('\t')).filter(([id, repo]) => id?.startsWith('sha256:') && repo !== 'berth-snapshot').map(([id]) => id!))];
  if (ids.length === 0) return undefined;
  // One call for all; an image removed between the listing and this look only drops its own line.
  const r = await execa('docker', ['image', 'inspect', '--format', '{{.Id}} {{len .RootFS.Layers}} {{index .Config.Labels "berth.snapshot"}}', ...ids], { cancelSignal: signal, reject: false });
  for (const line of r.stdout.split('\n')) {
    const m = /^(sha256:[0-9a-f]{64}) (\d+) ?(.*)$/.exec(line.trim());
    // A loaded build has exactly one layer and no snapshot label (an absent label prints "<no value>").
    if (m && m[2] === '1' && (m[3] === '' || m[3] === '<no value>')) return m[1];
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

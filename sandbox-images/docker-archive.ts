import { createHash } from 'node:crypto';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** The epoch, so that the config (and so the image id) never depends on when it was built. */
export const FIXED_CREATED = '1970-01-01T00:00:00Z';

export interface ImageConfigInput {
  name: string;
  definitionHash: string;
  cmd: string[];
  diffId: string;
}

/** Docker's name for the machine architecture, which the config must state. */
export function dockerArchitecture(arch: string = process.arch): string {
  const names: Record<string, string> = { x64: 'amd64', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x' };
  return names[arch] ?? arch;
}

/**
 * The image config bytes. Docker's image id is the sha256 of exactly these bytes, so the key
 * order here is part of the format: change it and every image id changes.
 */
export function imageConfigJson(input: ImageConfigInput): string {
  const config = {
    architecture: dockerArchitecture(),
    os: 'linux',
    created: FIXED_CREATED,
    config: {
      Cmd: input.cmd,
      Env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
      WorkingDir: '/workspace',
      Labels: { 'berth.image.definition': input.definitionHash, 'berth.image.name': input.name },
    },
    rootfs: { type: 'layers', diff_ids: [input.diffId] },
    history: [{ created: FIXED_CREATED, created_by: `berth sandbox-images ${input.name}` }],
  };
  return JSON.stringify(config);
}

/** `sha256:<hex>` of the config: the id Docker will give the loaded image. */
export function imageIdOf(configJson: string): string {
  return `sha256:${createHash('sha256').update(configJson).digest('hex')}`;
}

/**
 * Lays out a docker-archive (the `docker save` format) in `dir`: the config, the layer moved
 * into place, and manifest.json. Tags are applied after loading, not embedded, so that a reused
 * image and a loaded one are tagged the same way.
 */
export async function writeDockerArchiveDir(dir: string, layerTar: string, configJson: string): Promise<string> {
  const idHex = imageIdOf(configJson).slice('sha256:'.length);
  const layerDir = createHash('sha256').update(idHex + ':layer').digest('hex');
  await mkdir(join(dir, layerDir), { recursive: true });
  await rename(layerTar, join(dir, layerDir, 'layer.tar'));
  await writeFile(join(dir, `${idHex}.json`), configJson);
  const manifest = [{ Config: `${idHex}.json`, RepoTags: null, Layers: [`${layerDir}/layer.tar`] }];
  await writeFile(join(dir, 'manifest.json'), JSON.stringify(manifest));
  return imageIdOf(configJson);
}

import { execa } from 'execa';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildImage, imageDefinitions } from '../../sandbox-images';

const BUILD_TIMEOUT_MS = 120_000;

async function docker(args: string[]): Promise<string> {
  return (await execa('docker', args)).stdout.trim();
}

describe('sandbox image tiny', () => {
  beforeAll(async () => {
    // Without an engine this suite must fail loudly: a skipped image test hides a broken CI.
    const ping = await execa('docker', ['version', '--format', '{{.Server.APIVersion}}'], { reject: false });
    if (ping.exitCode !== 0) throw new Error(`Docker engine is not reachable: ${ping.stderr || ping.stdout}`);
  });

  it('is one of the image definitions', () => {
    expect(imageDefinitions).toContain('tiny');
  });

  it('gets the same image id from two separate builds and loads', { timeout: BUILD_TIMEOUT_MS }, async () => {
    const first = await buildImage('tiny', { signal: AbortSignal.timeout(BUILD_TIMEOUT_MS), force: true });
    const second = await buildImage('tiny', { signal: AbortSignal.timeout(BUILD_TIMEOUT_MS), force: true });
    expect(first.reused).toBe(false);
    expect(second.reused).toBe(false);
    expect(first.imageId).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(second.imageId).toBe(first.imageId);
    expect(await docker(['image', 'inspect', '--format', '{{.Id}}', 'berth/tiny:latest'])).toBe(first.imageId);
  });

  it('reuses the image already on the engine when the definition has not changed', { timeout: BUILD_TIMEOUT_MS }, async () => {
    const built = await buildImage('tiny', { signal: AbortSignal.timeout(BUILD_TIMEOUT_MS), force: true });
    const again = await buildImage('tiny', { signal: AbortSignal.timeout(BUILD_TIMEOUT_MS) });
    expect(again.reused).toBe(true);
    expect(again.imageId).toBe(built.imageId);
    expect(again.tags).toEqual(['berth/tiny:latest', expect.stringMatching(/^berth\/tiny:[0-9a-f]{12}$/)]);
    for (const tag of again.tags) expect(await docker(['image', 'inspect', '--format', '{{.Id}}', tag])).toBe(built.imageId);
  });

  it('stops with image_build_cancelled when its signal is aborted', async () => {
    await expect(buildImage('tiny', { signal: AbortSignal.abort(), force: true })).rejects.toMatchObject({ code: 'image_build_cancelled', retryable: true });
  });

  it('refuses an image name it has no definition for', async () => {
    await expect(buildImage('nope', { signal: AbortSignal.timeout(5_000) })).rejects.toMatchObject({ code: 'image_unknown' });
  });

  it('carries a fixed creation time, its definition labels and /workspace as working directory', async () => {
    const inspect = JSON.parse(await docker(['image', 'inspect', 'berth/tiny:latest'])) as Array<{
      Created: string;
      Config: { Labels: Record<string, string>; WorkingDir: string; Cmd: string[] };
    }>;
    const image = inspect[0];
    expect(image?.Created).toMatch(/^1970-01-01T00:00:00/);
    expect(image?.Config.Labels['berth.image.name']).toBe('tiny');
    expect(image?.Config.Labels['berth.image.definition']).toMatch(/^[0-9a-f]{64}$/);
    expect(image?.Config.WorkingDir).toBe('/workspace');
    expect(image?.Config.Cmd).toEqual(['/bin/sh']);
  });

  it('runs commands as uid 1000 in a /workspace that uid 1000 owns and can write', async () => {
    const script = 'id -u; id -un; stat -c %u:%g /workspace; stat -c %a /tmp; touch /workspace/probe && echo writable';
    const out = await docker(['run', '--rm', '--network', 'none', '--user', '1000:1000', 'berth/tiny:latest', 'sh', '-c', script]);
    expect(out.split('\n')).toEqual(['1000', 'berth', '1000:1000', '1777', 'writable']);
  });

  it('provides the busybox applets that tools and tests rely on', async () => {
    const applets = 'sh ls cat echo sleep kill setsid mkdir rm cp mv dd head tail sha256sum find grep sed awk wc env id ps stat touch chmod tar timeout yes du df uname';
    const script = `for a in ${applets}; do [ -x /bin/$a ] || echo missing $a; done; echo done`;
    expect(await docker(['run', '--rm', '--network', 'none', 'berth/tiny:latest', 'sh', '-c', script])).toBe('done');
  });
});

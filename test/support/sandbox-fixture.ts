import type Dockerode from 'dockerode';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino, { type Logger } from 'pino';
import { test as base } from 'vitest';
import { openSqliteStore } from '../../host/store';
import { createSandboxHost, type SandboxHost, type SandboxSpec } from '../../host/sandbox';
import { systemClock } from '../../host/support/clock';
import { newId } from '../../host/support/ids';
import { containersWithLabel, requireEngine, requireTinyImage } from './docker-engine';
import { tinySpec } from './sandbox-spec';
import { leakGuard, type Leftover } from './leak-check';
import { removeHostArtifacts } from './plan-fixture';

export { tinySpec };

export type Store = ReturnType<typeof openSqliteStore>;

export interface SandboxWorld {
  docker: Dockerode;
  imageId: string;
  hostId: string;
  store: Store;
  storePath: string;
  host: SandboxHost;
  logger: Logger;
  dir: string;
  spec(over?: Parameters<typeof tinySpec>[1]): SandboxSpec;
  /** Opts this test out of the leak check, with the reason it leaves objects behind on purpose. */
  allowLeftovers(reason: string, only?: (l: Leftover) => boolean): void;
}

/**
 * `sandbox`: a SandboxHost with a unique host id, a real SQLite store in a temp dir, and the tiny
 * image. Whatever containers carry the host id are removed after the test, pass or fail; on
 * failure their ids are printed first.
 */
export const test = base.extend<{ sandbox: SandboxWorld }>({
  sandbox: async ({ onTestFailed }, use) => {
    const docker = await requireEngine();
    const imageId = await requireTinyImage(docker);
    const hostId = newId('testhost');
    const dir = mkdtempSync(join(tmpdir(), 'berth-sandbox-'));
    const storePath = join(dir, 'berth.db');
    const store = openSqliteStore(storePath);
    const logger = pino({ level: process.env.BERTH_TEST_LOG ?? 'warn', base: { hostId } });
    const host = createSandboxHost({ docker, records: store, clock: systemClock, logger, hostId });
    // Teardown may run before or after the failure hook; report what was there either way.
    let removedIds: string[] | undefined;
    const leaks = leakGuard(docker, hostId);
    onTestFailed(async () => {
      const ids = removedIds ?? (await containersWithLabel(docker, `berth.host=${hostId}`).catch(() => []));
      console.error(`[sandbox fixture] host ${hostId} containers at failure: ${ids.length ? ids.join(', ') : '(none)'}`);
    });
    try {
      await use({ docker, imageId, hostId, store, storePath, host, logger, dir, spec: (over) => tinySpec(imageId, over), allowLeftovers: (r, only) => leaks.allowLeftovers(r, only) });
    } finally {
      await host.close();
      // After the host closed: every container, network or snapshot image of the host id that the
      // store does not record as kept fails the test, once everything is removed.
      let leak: unknown;
      try {
        leak = await leaks.check(store);
      } catch (err) {
        leak = err;
      }
      const ids = await containersWithLabel(docker, `berth.host=${hostId}`).catch(() => []);
      removedIds = ids;
      await Promise.all(ids.map((id) => docker.getContainer(id).remove({ force: true, v: true }).catch(() => undefined)));
      await removeHostArtifacts(docker, hostId, [storePath]).catch(() => undefined);
      await store.close();
      rmSync(dir, { recursive: true, force: true });
      if (leak) throw leak;
    }
  },
});

export { expect, describe } from 'vitest';

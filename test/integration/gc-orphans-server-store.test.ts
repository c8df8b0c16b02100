import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { lastJson, planFixture } from '../support/plan-fixture';
import { sharedPostgres, stopSharedPostgres } from '../support/store-kinds';

type Fixture = Awaited<ReturnType<typeof planFixture>>;
const fixtures: Fixture[] = [];
afterEach(async () => {
  for (const f of fixtures.splice(0)) await f.cleanup();
});
afterAll(stopSharedPostgres, 60_000);

interface Orphans {
  orphans: { stores: Array<{ storeId: string; state: string; why: string; images: unknown[]; removed?: unknown }> };
}

describe('berth gc --orphans beside a PostgreSQL store on the same engine', { timeout: 180_000 }, () => {
  it('leaves a live PostgreSQL store\'s snapshot images alone: its location is a server, not a file that could have been deleted', async () => {
    const pg = await planFixture([{ name: 'one', run: 'echo one > one.txt' }], undefined, { store: await (await sharedPostgres()).createStoreDatabase('gcpg') });
    fixtures.push(pg);
    const ran = await pg.cli(['run', pg.plan]);
    expect(ran.code, ran.stderr.slice(-800)).toBe(0);
    const pgId = await pg.read((s) => s.storeId());
    const images = async () => (await pg.docker.listImages({ filters: { label: [`berth.store=${pgId}`] } })).length;
    const before = await images();
    expect(before).toBeGreaterThan(0);
    // Another store's operator on the same engine, in another directory.
    const other = await planFixture([{ name: 'x', run: 'true' }]);
    fixtures.push(other);
    const listed = lastJson<Orphans>(await other.cli(['gc', '--orphans', '--json'])).orphans.stores.find((s) => s.storeId === pgId);
    // Before: 'gone' ('store /<cwd>/postgresql no longer exists and no process that made them is alive'): the label was the word resolved as a path.
    expect(listed?.state, listed?.why).toBe('unchecked');
    expect(listed?.why).toContain('store postgresql is not a file on this machine');
    const removed = await other.cli(['gc', '--orphans', '--remove', '--only', pgId, '--json']);
    expect(removed.code, removed.stderr).toBe(0);
    expect(await images()).toBe(before);
  });
});

import { gc as collect } from '../../api/gc';
import { existsSync } from 'node:fs';
import { defaultLogger } from '../../api/assemble';
import { orphans as findOrphans, orphansOnEngine } from '../../api/orphans';
import type { OrphanStore } from '../../sandbox';
import { isPostgresUrl } from '../../store';
import { dockerClient, storePath, type CliContext } from '../context';
import type { CollectedFork } from '../../fork';
import { emit, table } from '../output';
import { BASE_REPOSITORY } from '../../snapshot';

/**
 * The name an operator knows an environment's image by: not a snapshot tag, and not the name a
 * registry transport gave it (`HOST:PORT/berth-base:<id>`, left on the image once it was pushed),
 * which the first of its names could be (a run that pushed berth/tiny showed "on 127.0.0.1:34427/berth-base:7312..."
 * instead of berth/tiny:latest); any name before the image's short id.
 */
export function environmentName(names: string[], imageId: string): string {
  const own = names.filter((n) => !n.startsWith('berth-snapshot') && n !== '<none>:<none>');
  return own.find((n) => !n.includes(`/${BASE_REPOSITORY}:`)) ?? own[0] ?? imageId.replace(/^sha256:/, '').slice(0, 12);
}

export { DEFAULT_GC_GRACE_S } from '../../api/gc';
export { manifestGcDeps } from '../../api/run-end';

/** `berth gc [--keep N] [--grace S] [--forks-older-than D]`: see the API's `gc` for what goes; this prints it. */
export async function gc(ctx: CliContext, keep?: number, graceS?: number, forksOlderThanMs?: number): Promise<number> {
  const r = await collect(ctx, { keep, graceS, forksOlderThanMs });
  const { endedRuns, removed, egress, unrecordedImages: orphans, keptImages: kept, reclaimedBytes, pruned, snapshotDeltas: deltas, registryManifests, forks, forksCollectedBefore } = r;
  const inGrace = kept.filter((k) => k.why === 'grace');
  const unfinished = kept.filter((k) => k.why === 'run_unfinished');
  emit(ctx.json, { hostId: ctx.hostId, graceS: r.graceS, endedRuns, removed, egress, unrecordedImages: orphans, keptImages: kept, reclaimedBytes, pruned: pruned.map((s) => s.id), snapshotDeltas: deltas, registryManifests, ...(forks ? { forks, forksCollectedBefore } : {}) }, () =>
    [
      ...(forks ? [forksLine(forks, forksCollectedBefore ?? 0)] : []),
      ...(endedRuns.settled.length ? [`settled the tasks a stopped host left live in ${endedRuns.settled.length} ended run(s): ${endedRuns.settled.join(' ')}`] : []),
      ...endedRuns.left.map((l) => `ended run ${l.runId} still has live tasks: ${l.reason}`),
      removed.length === 0
        ? `no leftover containers in this store (host ${ctx.hostId})`
        : `removed ${removed.length} container(s):\n${table([['CONTAINER', 'LEASE', 'REASON'], ...removed.map((x) => [x.containerId.slice(0, 12), x.leaseId ?? '-', x.reason])])}`,
      ...(egress.networks.length ? [`removed ${egress.networks.length} sandbox network(s): ${egress.networks.map((n) => `${n.name} (lease ${n.leaseId || '-'})`).join(' ')}`] : []),
      ...(egress.rules.length ? [`removed ${egress.rules.length} firewall rule(s):\n${egress.rules.map((x) => `  ${x}`).join('\n')}`] : []),
      ...(egress.keptNetworks.length ? [`kept ${egress.keptNetworks.length} sandbox network(s): ${egress.keptNetworks.map((n) => `${n.name} (${n.why})`).join('; ')}`] : []),
      // Said only when true: an unrecorded image kept inside the grace is named below instead.
      ...(orphans.length === 0
        ? kept.length ? [] : ['no unrecorded snapshot images']
        : [`removed ${orphans.length} unrecorded snapshot image tag(s), ${(reclaimedBytes / 1e6).toFixed(1)} MB reclaimed: ${orphans.map((o) => o.snapshotId).join(' ')}`]),
      ...(inGrace.length
        ? [`kept ${inGrace.length} unrecorded snapshot image tag(s) inside the ${r.graceS} s grace (their record may be about to commit; --grace 0 takes them once their run is final): ${inGrace.map((k) => `${k.snapshotId} (${Math.round(k.ageMs / 1000)} s old)`).join(' ')}`]
        : []),
      ...(unfinished.length ? [`kept ${unfinished.length} unrecorded snapshot image tag(s) of unfinished runs: ${unfinished.map((k) => (k.runId ? `${k.snapshotId} (run ${k.runId})` : `${k.snapshotId} (a tag on an environment image: the store has an unfinished run)`)).join(' ')}`] : []),
      ...(deltas.loaded.length + deltas.dropped.length === 0 ? [] : [`snapshot layers kept in the store: ${deltas.loaded.length} loaded into the engine, ${deltas.dropped.length} no record needs removed`]),
      pruned.length === 0 ? 'no snapshots to prune' : `pruned ${pruned.length} snapshot(s): ${pruned.map((s) => s.id).join(' ')}`,
      ...(registryManifests.deleted.length ? [`deleted ${registryManifests.deleted.length} pruned snapshot manifest(s) from the registry`] : []),
      ...(registryManifests.pending.length
        ? [`${registryManifests.pending.length} pruned snapshot manifest(s) not deleted from the registry (the next gc tries again):\n${registryManifests.pending.map((x) => `  ${x.registryRef}: ${x.error}`).join('\n')}`]
        : []),
    ].join('\n'),
  );
  return 0;
}

function forksLine(forks: CollectedFork[], before: number): string {
  const earlier = before ? ` (${before} collected before)` : '';
  if (forks.length === 0) return `no finished forks that old with snapshots left to remove${earlier}`;
  const removed = forks.filter((f) => f.snapshots.length);
  const kept = forks.filter((f) => f.kept?.length);
  return [
    ...(removed.length ? [`finished forks: ${removed.length}, their ${removed.reduce((n, f) => n + f.snapshots.length, 0)} snapshot(s) removed (${removed.map((f) => f.runId).join(' ')})${earlier}`] : []),
    ...(kept.length ? [`kept ${kept.reduce((n, f) => n + f.kept!.length, 0)} snapshot(s) of finished forks that an unfinished fork starts from: ${kept.map((f) => `${f.runId} (${f.kept!.join(' ')})`).join('; ')}`] : []),
  ].join('\n');
}

/**
 * `berth gc --orphans [--remove]`: what stores other than this one left on the engine, and which
 * of those stores are gone; `--remove` removes a gone store's (see the API's `orphans`).
 */
export async function gcOrphans(ctx: () => CliContext, o: { store?: string; json: boolean; debug?: boolean; remove: boolean; only?: string[] }): Promise<number> {
  const { remove, only } = o;
  const path = storePath(o.store);
  // No store at the path (the operator's only store was deleted): the engine alone is looked at,
  // every store's leftovers listed, and no store is created for it.
  const r = !isPostgresUrl(path) && !existsSync(path) ? await orphansOnEngine({ docker: dockerClient(), logger: defaultLogger({ debug: o.debug }) }, { remove, only }) : await findOrphans(ctx(), { remove, only });
  const gone = r.stores.filter((s) => s.state === 'gone');
  const envTags = (n: number) => (n ? `, ${n} snapshot tag(s) on environment images` : '');
  const count = (s: OrphanStore) => `${s.containers.length} container(s), ${s.networks.length} network(s), ${s.rules.length} firewall rule(s), ${s.images.length} snapshot image(s)${envTags(s.tags.length)}`;
  // One entry a tag (a lease's rules: IPv4 and IPv6, INPUT and forwarding), with the bridge they match.
  const leases = (rules: OrphanStore['rules']) => [...new Set(rules.map((x) => x.tag))].map((t) => {
    const on = rules.find((x) => x.tag === t && x.bridge);
    return `${t}${on ? ` (${on.bridge}${on.bridgeGone ? ', gone' : ''})` : ''}`;
  }).join(' ');
  emit(o.json, { orphans: r }, () =>
    [
      r.stores.length === 0 ? 'no containers or snapshot images of another store on this engine' : '',
      ...r.stores.map((s) =>
        (s.removed
          ? `removed store ${s.storeId}'s ${s.removed.containers} container(s), ${s.removed.networks} network(s), ${s.removed.rules} firewall rule(s), ${s.removed.images} snapshot image(s)${envTags(s.removed.tags)}: ${s.why}`
          : s.state === 'gone'
            ? `store ${s.storeId} (${s.location}): ${count(s)} can go: ${s.why}`
            : `left store ${s.storeId}${s.location ? ` (${s.location})` : ''}: ${count(s)}: ${s.why}`) +
          (s.rules.length ? `\n  firewall rules: ${leases(s.rules)}` : '') +
          s.images.filter((i) => i.neededBy).map((i) => `\n  kept snapshot image ${i.imageId.replace(/^sha256:/, '').slice(0, 12)} (${i.tags.join(' ') || 'untagged'}): ${i.neededBy}`).join('') +
          s.tags.filter((t) => t.neededBy).map((t) => `\n  kept snapshot tag ${t.snapshotId} on ${environmentName(t.names, t.imageId)}: ${t.neededBy}`).join(''),
      ),
      ...(r.unattributedRules.length
        ? [`left ${r.unattributedRules.length} firewall rule(s) no network or container on this engine attributes to a store (which store put them in cannot be told): ${leases(r.unattributedRules)}`]
        : []),
      ...(remove && only ? [`removed only the leftovers of ${only.join(' ')} (--only)`] : []),
      ...(gone.length && !remove ? [`nothing was removed; berth gc --orphans --remove removes the ${gone.length} gone store(s)' leftovers`] : []),
    ].filter(Boolean).join('\n'),
  );
  return 0;
}

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Dockerode from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENTRY } from '../../host/agent';
import { openStore } from '../../host/store';
import { longScript, WINDOW } from '../support/agent-long-script';
import { bundleScript } from '../support/bundle-script';
import { runNode } from '../support/child';
import { requireEngine, requireTinyImage } from '../support/docker-engine';
import { invariantGuard } from '../support/invariant-check';
import { startModelServer, turnFromCallIds, type ModelServer, type RecordedRequest } from '../support/model-server';
import { removeHostArtifacts } from '../support/plan-fixture';

/**
 * The long session of support/agent-long-script.ts (40 read turns of 1.5 KB against a scripted
 * server with a 4,096-token window, so the context is compacted every few turns) run by a child
 * host that is SIGKILLed at a named fault point, then resumed by a new process. The requests the
 * server received must be the uninterrupted run's, turn by turn, body by body: the resumed host
 * rebuilt exactly the context the first one would have sent.
 */
const TURNS = 40;
let script: string;
let docker: Dockerode;
let imageId: string;
const dirs: string[] = [];
const hosts: string[] = [];
const servers: ModelServer[] = [];

interface Outcome {
  state: string;
  /** Every body the server received, by turn (a turn asked twice appears twice). */
  byTurn: Map<number, RecordedRequest['body'][]>;
  compactions: unknown[];
  overflows: number;
  maxPromptTokens: number;
}

async function runJob(faults: string[]): Promise<Outcome> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-context-crash-'));
  dirs.push(dir);
  const hostId = `ctxcrash-${process.pid}-${hosts.length}`;
  hosts.push(hostId);
  const model = await startModelServer((turn, body) => longScript(turn, body, TURNS), { contextTokens: WINDOW, turnOf: turnFromCallIds });
  servers.push(model);
  const db = join(dir, 'agent.db');
  const start = (env: Record<string, string>) => runNode(script, [db, model.url, hostId, imageId, String(TURNS), String(WINDOW)], env, 300_000);
  for (const f of faults) {
    const end = await start({ BERTH_FAULT: f });
    expect(end.signal, `armed ${f}: ${end.stderr.slice(-1500)}`).toBe('SIGKILL');
  }
  const end = await start({});
  expect(end.code, end.stderr.slice(-1500)).toBe(0);
  const { state } = JSON.parse(end.stdout.trim().split('\n').at(-1)!) as { state: string };
  const store = await openStore(db);
  let compactions: unknown[];
  try {
    const [run] = await store.listRuns();
    compactions = (await store.listEntries(run!.sessionId)).filter((e) => e.kind === ENTRY.compaction).map((e) => e.body);
  } finally {
    await store.close();
  }
  const broken = await invariantGuard().check(db);
  expect(broken?.message).toBeUndefined();
  await removeHostArtifacts(docker, hostId);
  const byTurn = new Map<number, RecordedRequest['body'][]>();
  for (const r of model.requests) byTurn.set(r.turn, [...(byTurn.get(r.turn) ?? []), r.body]);
  return { state, byTurn, compactions, overflows: model.requests.filter((r) => r.overflow).length, maxPromptTokens: Math.max(...model.requests.map((r) => r.promptTokens)) };
}

let baseline: Outcome;

beforeAll(async () => {
  docker = await requireEngine();
  imageId = await requireTinyImage(docker);
  script = await bundleScript(join(import.meta.dirname, 'agent-long-job.ts'));
  baseline = await runJob([]);
}, 300_000);

afterAll(async () => {
  for (const s of servers) await s.close().catch(() => {});
  for (const h of hosts) await removeHostArtifacts(docker, h).catch(() => {});
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  if (script) rmSync(script, { force: true });
}, 60_000);

function expectSameRequests(o: Outcome) {
  expect(o.state).toBe('completed');
  expect(o.overflows).toBe(0);
  expect(o.compactions).toEqual(baseline.compactions);
  expect([...o.byTurn.keys()]).toEqual([...baseline.byTurn.keys()]);
  for (const [turn, bodies] of o.byTurn) {
    // However often the resumed host asked for a turn, it asked exactly what the uninterrupted one did.
    for (const b of bodies) expect(b, `turn ${turn}`).toEqual(baseline.byTurn.get(turn)![0]);
  }
}

describe('an agent session compacted to its window, killed and resumed', { timeout: 900_000 }, () => {
  it('runs uninterrupted to completion with several compactions and every request within the window', () => {
    expect(baseline.state).toBe('completed');
    expect(baseline.overflows).toBe(0);
    expect(baseline.maxPromptTokens).toBeLessThanOrEqual(WINDOW);
    expect(baseline.compactions.length).toBeGreaterThanOrEqual(3);
    expect(baseline.byTurn.size).toBe(TURNS + 2);
    for (const bodies of baseline.byTurn.values()) expect(bodies).toHaveLength(1);
  });

  it('sends after a SIGKILL while a compaction is decided (not yet committed) the very requests the uninterrupted session sent', async () => {
    expectSameRequests(await runJob(['agent.compaction#2']));
  });

  it('sends after a SIGKILL right after a compaction committed (before its request) the very requests the uninterrupted session sent', async () => {
    expectSameRequests(await runJob(['agent.compaction.committed#3']));
  });

  it('sends after SIGKILLs in the middle of tool turns the very requests the uninterrupted session sent', async () => {
    expectSameRequests(await runJob(['before:phase.complete:agent-tool#12', 'after:phase.next:agent-generate#9']));
  });
});

/**
 * context: the host's cost of a model request in a session longer than the window.
 *
 * One agent session of 120 read turns of 1.5 KB against the scripted server with a 4,096-token
 * window (`model.contextTokens` = 4,096), so the context is compacted every few turns. Per turn,
 * the time from the commit that spawns its generation task to the server receiving its request:
 * prepare (entries read, the estimate, and on a compaction turn the cut's search, its commit and
 * a second prepare), the request phase's commit and rebuild, and the HTTP send.
 *
 * - compaction_request_ms: median over turns that compacted, against the median over the turns
 *   right before them (the longest contexts sent uncompacted) - a ratio;
 * - request_ms_compacted / request_ms_plain: the two medians (absolute, ms).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { ENTRY, submitAgentRun, type CompactionEntry } from '../host/agent';
import { createHostRuntime } from '../host/runtime/host-runtime';
import { createSandboxHost, snapshotEngine } from '../host/sandbox';
import { openSqliteStore } from '../host/store';
import { systemClock } from '../host/support';
import { newId } from '../host/support/ids';
import { tinyEnvironment } from '../test/support/agent-environment';
import { longScript, TURNS, WINDOW } from '../test/support/agent-long-script';
import { startModelServer, turnFromCallIds } from '../test/support/model-server';
import { removeHostArtifacts } from '../test/support/plan-fixture';
import { requireEngine, requireTinyImage } from '../test/support/docker-engine';
import { median } from './_stats';
import type { Report } from './run';

export default async function contextBench(report: Report): Promise<void> {
  const docker = await requireEngine();
  const imageId = await requireTinyImage(docker);
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-context-'));
  const store = openSqliteStore(join(dir, 'bench.db'));
  const hostId = newId('benchctx');
  const logger = pino({ level: 'warn' });
  const sandbox = createSandboxHost({ docker, records: store, clock: systemClock, logger, hostId });
  const rt = createHostRuntime({ store, sandbox, engine: snapshotEngine(docker), clock: systemClock, logger, hostId });
  /** Server turn (0-based) -> when its request arrived; generation turn (1-based) -> when it was spawned. */
  const arrived = new Map<number, number>();
  const spawned: number[] = [];
  const model = await startModelServer(
    (turn, body) => {
      if (!arrived.has(turn)) arrived.set(turn, performance.now());
      return longScript(turn, body);
    },
    { contextTokens: WINDOW, turnOf: turnFromCallIds },
  );
  rt.kernel.onCommit((e) => {
    if (e.label === 'phase.spawn:agent') spawned.push(performance.now());
  });
  process.env.BERTH_BENCH_MODEL_KEY = 'sk-bench';
  try {
    await rt.kernel.start();
    const { run } = await submitAgentRun(
      { ...rt, toolNames: [...rt.agent.tools.keys()] },
      {
        message: 'Read big.txt many times.',
        settings: { tools: ['write_file', 'read_file'], maxTurns: TURNS + 5, model: { baseUrl: model.url, model: 'bench', apiKeyEnv: 'BERTH_BENCH_MODEL_KEY', contextTokens: WINDOW } },
        environment: tinyEnvironment(imageId),
      },
    );
    const done = await rt.kernel.waitForRun(run.id);
    if (done.state !== 'completed') throw new Error(`bench run ended ${done.state}`);
    if (model.requests.some((r) => r.overflow)) throw new Error('a request overflowed the window');
    const compacted = new Set((await store.listEntries(run.sessionId)).filter((e) => e.kind === ENTRY.compaction).map((e) => (e.body as unknown as CompactionEntry).turn));
    const ms = (turn: number) => arrived.get(turn - 1)! - spawned[turn - 1]!;
    const withCut = [...compacted].map(ms);
    const before = [...compacted].filter((t) => t > 1 && !compacted.has(t - 1)).map((t) => ms(t - 1));
    report('compaction_request_ms', median(withCut) / median(before), 'ratio');
    report('request_ms_compacted', median(withCut), 'absolute');
    report('request_ms_plain', median(before), 'absolute');
    report('compactions', compacted.size, 'absolute');
  } finally {
    await rt.kernel.stop().catch(() => {});
    await sandbox.close().catch(() => {});
    await model.close();
    await removeHostArtifacts(docker, hostId).catch(() => {});
    await store.close().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}

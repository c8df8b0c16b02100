/**
 * The agent run of the agent crash test, as a child process:
 *   node agent-job.mjs DB MODEL_URL HOST_ID IMAGE_ID
 * A host (store, sandbox, kernel with every task kind) that submits one agent run under a fixed
 * request id, so every restart continues the same run, and prints `{"runId","state"}` once the
 * run settles (a final state or needs_reconciliation). With BERTH_COMMIT_KEYS=FILE every commit
 * is also named in FILE (see support/commit-keys.ts).
 */
import Dockerode from 'dockerode';
import pino from 'pino';
import { submitAgentRun } from '../../host/agent';
import { createHostRuntime } from '../../host/runtime/host-runtime';
import { createSandboxHost, snapshotEngine } from '../../host/sandbox';
import { openStore } from '../../host/store';
import { systemClock } from '../../host/support';
import { tinyEnvironment } from '../support/agent-environment';
import { withCommitKeys } from '../support/commit-keys';

const [dbPath, modelUrl, hostId, imageId] = process.argv.slice(2) as [string, string, string, string];
process.env.BERTH_CRASH_MODEL_KEY = 'sk-crash-test';
const docker = new Dockerode();
// A SQLite file path or a postgres:// URL: the crash suite runs against both stores.
const opened = await openStore(dbPath);
const store = process.env.BERTH_COMMIT_KEYS ? await withCommitKeys(opened, process.env.BERTH_COMMIT_KEYS) : opened;
const logger = pino({ level: process.env.BERTH_TEST_LOG ?? 'silent' });
const sandbox = createSandboxHost({ docker, records: store, clock: systemClock, logger, hostId });
const rt = createHostRuntime({ store, sandbox, engine: snapshotEngine(docker), clock: systemClock, logger, hostId });
await rt.kernel.start();
const { run } = await submitAgentRun(
  { ...rt, toolNames: [...rt.agent.tools.keys()] },
  {
    requestId: 'agent-crash-job',
    message: 'Write add.sh and its test, run the test, fix the bug, and run it again.',
    settings: { model: { baseUrl: modelUrl, model: 'scripted-1', apiKeyEnv: 'BERTH_CRASH_MODEL_KEY', backoffMs: 10, maxBackoffMs: 50 } },
    environment: tinyEnvironment(imageId),
  },
);
const settled = await rt.kernel.waitForRun(run.id);
await rt.kernel.stop();
await sandbox.close();
await store.close();
process.stdout.write(`${JSON.stringify({ runId: run.id, state: settled.state })}\n`);
process.exit(0);

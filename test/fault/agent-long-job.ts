/**
 * A long agent session as a child process, for the context-window crash test:
 *   node agent-long-job.mjs DB MODEL_URL HOST_ID IMAGE_ID TURNS WINDOW
 * Submits one agent run under a fixed request id (so a restart continues the same run) that may
 * call write_file and read_file for TURNS+5 turns with `model.contextTokens = WINDOW`, and prints
 * `{"runId","state"}` once it settles.
 */
import Dockerode from 'dockerode';
import pino from 'pino';
import { submitAgentRun } from '../../host/agent';
import { createHostRuntime } from '../../host/runtime/host-runtime';
import { createSandboxHost, snapshotEngine } from '../../host/sandbox';
import { openStore } from '../../host/store';
import { systemClock } from '../../host/support';
import { tinyEnvironment } from '../support/agent-environment';

const [dbPath, modelUrl, hostId, imageId, turns, window] = process.argv.slice(2) as [string, string, string, string, string, string];
process.env.BERTH_LONG_MODEL_KEY = 'sk-long-test';
const docker = new Dockerode();
const store = await openStore(dbPath);
const logger = pino({ level: process.env.BERTH_TEST_LOG ?? 'silent' });
const sandbox = createSandboxHost({ docker, records: store, clock: systemClock, logger, hostId });
const rt = createHostRuntime({ store, sandbox, engine: snapshotEngine(docker), clock: systemClock, logger, hostId });
await rt.kernel.start();
const { run } = await submitAgentRun(
  { ...rt, toolNames: [...rt.agent.tools.keys()] },
  {
    requestId: 'agent-long-job',
    message: 'Read big.txt many times.',
    settings: {
      tools: ['write_file', 'read_file'],
      maxTurns: Number(turns) + 5,
      model: { baseUrl: modelUrl, model: 'scripted-1', apiKeyEnv: 'BERTH_LONG_MODEL_KEY', backoffMs: 10, maxBackoffMs: 50, contextTokens: Number(window) },
    },
    environment: tinyEnvironment(imageId),
  },
);
const settled = await rt.kernel.waitForRun(run.id);
await rt.kernel.stop();
await sandbox.close();
await store.close();
process.stdout.write(`${JSON.stringify({ runId: run.id, state: settled.state })}\n`);
process.exit(0);

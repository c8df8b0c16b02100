import { readFileSync, writeFileSync } from 'node:fs';
import { startCountingService } from './counting-service';
import { planFixture } from './plan-fixture';

/**
 * A three-step plan whose middle `never` step calls a loopback counting service (through the
 * audited proxy) and changes the workspace: `one`, `deploy`, then `third` (by default another
 * append). The service says how often the deploy really happened.
 */
export async function deployPlan(third = 'echo three >> steps.log') {
  const service = await startCountingService();
  const port = new URL(service.url).port;
  const fx = await planFixture([
    { name: 'one', run: 'echo one >> steps.log' },
    { name: 'deploy', run: `timeout 20 busybox wget -q -O - http://localhost:${port}/deploy && echo deployed >> steps.log`, replay: 'never' },
    { name: 'three', run: third },
  ]);
  const envFile = `${fx.dir}/env.yaml`;
  writeFileSync(envFile, `${readFileSync(envFile, 'utf8')}network: { mode: allowlist, allow: ["localhost:${port}"], allowOverride: ["localhost:${port}"] }\n`);
  return { fx, service };
}

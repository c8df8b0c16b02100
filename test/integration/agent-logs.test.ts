import { afterEach, describe, expect, it } from 'vitest';
import { lastJson } from '../support/plan-fixture';
import { cliWorld, type CliWorld } from '../support/agent-cli-world';

let w: CliWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

describe('berth logs of an agent run', { timeout: 180_000 }, () => {
  it('shows the task, each tool call and result, and the output a command printed, where it said the run had no finished steps', async () => {
    w = await cliWorld([
      { content: 'Running it.', toolCalls: [{ name: 'exec', arguments: { command: 'echo printed-by-the-tool; echo to-stderr >&2' } }] },
      { content: 'Reading the file.', toolCalls: [{ name: 'read_file', arguments: { path: 'hello.txt' } }] },
      { content: 'Done.' },
    ]);
    const end = await w.cli([...w.agentArgs('check the greeting\nsecond line of the task'), '--json']);
    expect(end.code, end.stderr).toBe(0);
    const runId = lastJson<{ run: { id: string } }>(end).run.id;
    const logs = await w.cli(['logs', runId]);
    expect(logs.code, logs.stderr).toBe(0);
    const lines = logs.stdout.split('\n');
    expect(lines).not.toContain(`berth │ run ${runId} has no finished steps yet`);
    expect(lines[0]).toBe('berth │ task: check the greeting');
    expect(lines.filter((l) => /^berth │ turn \d+: tool call (exec|read_file) /.test(l))).toHaveLength(2);
    expect(lines.some((l) => /^berth │ tool exec \S+: ok/.test(l))).toBe(true);
    expect(lines).toContain('  out │ printed-by-the-tool');
    expect(lines.some((l) => /^berth │ turn \d+: answer/.test(l))).toBe(true);
    // The exec's output was written while it ran, as one ended attempt of the call.
    const json = JSON.parse((await w.cli(['logs', runId, '--json'])).stdout) as { attempts: Array<{ source: string; label: string; state: string; stdout: string; stderr: string }> };
    const exec = json.attempts.filter((a) => a.label === 'exec');
    expect(exec.length).toBeGreaterThanOrEqual(1);
    expect(exec.map((a) => a.state)).toEqual(exec.map(() => 'ended'));
    expect(exec.map((a) => a.stdout).join('')).toContain('printed-by-the-tool\n');
    expect(exec.map((a) => a.stderr).join('')).toContain('to-stderr\n');
  });
});

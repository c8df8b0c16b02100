import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../host/store';
import { runNode } from '../support/child';
import { bundledCli, planFixture } from '../support/plan-fixture';

describe('usage errors', () => {
  it('show the synopsis of the command that was mistyped, not every command; --json keeps the error alone; an unknown command still lists them all', async () => {
    const cli = await bundledCli();
    const dir = await mkdtemp(join(tmpdir(), 'berth-usage-'));
    const store = join(dir, 'berth.db');
    await (await openStore(store)).close();
    // Before: the parse error, then all ~75 lines of berth --help.
    const flag = await runNode(cli, ['gc', '--keep', '-1']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("berth: Option '--keep' argument is ambiguous.");
    expect(flag.stderr).toContain('usage: berth gc [--keep N] [--grace S] [--forks-older-than DURATION]');
    expect(flag.stderr).toContain('(berth --help lists every command)');
    expect(flag.stderr).not.toContain('usage: berth <command>');
    expect(flag.stderr).not.toContain('serve [--port');

    const both = await runNode(cli, ['fork', '--nope']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('usage: berth fork RUN --at STEP|SNAPSHOT');
    expect(both.stderr).toContain('  fork SESSION --at TURN');
    expect(both.stderr).not.toContain('  tree RUN');

    const missing = await runNode(cli, ['show', '--store', store]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^berth: usage: missing RUN\n\nusage: berth show RUN \[--all\]/);
    expect(missing.stderr).not.toContain('  logs RUN');
    const json = await runNode(cli, ['show', '--json', '--store', store]);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toEqual({ error: { code: 'usage', message: 'missing RUN', retryable: false, ids: {} } });

    const unknown = await runNode(cli, ['shwo', 'run_1']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('berth: unknown command "shwo"');
    expect(unknown.stderr).toContain('usage: berth <command> [options]');
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses arguments a command does not take (berth cancel A B cancelled A only and exited 0), naming them, before anything is committed', async () => {
    const cli = await bundledCli();
    const dir = await mkdtemp(join(tmpdir(), 'berth-usage-'));
    const store = join(dir, 'berth.db');
    await (await openStore(store)).close();
    for (const args of [['cancel', 'run_a', 'run_b'], ['accept', 'run_a', 'run_b'], ['show', 'run_a', 'run_b'], ['agent', 'fix', 'the', 'bug'], ['status', 'running']]) {
      const r = await runNode(cli, [...args, '--store', store]);
      // Before: the first argument was acted on (run_not_found here, a cancel of run_a with a real one) and the rest ignored.
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toContain(`berth: usage: berth ${args[0]} does not take `);
      expect(r.stderr.split('\n')[0]).toContain(JSON.stringify(args.at(-1)));
      expect(r.stderr).toContain(`usage: berth ${args[0]}`);
    }
    // `check RUN --all` checked RUN alone and said nothing of --all.
    const both = await runNode(cli, ['check', 'run_a', '--all', '--store', store]);
    expect(both.code, both.stderr).toBe(2);
    expect(both.stderr).toContain('berth: usage: berth check takes RUN or --all, not both');
    const json = await runNode(cli, ['cancel', 'run_a', 'run_b', '--json', '--store', store]);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stderr)).toMatchObject({ error: { code: 'usage', details: { unexpected: ['run_b'] } } });
    expect(json.stdout).toBe('');
    await rm(dir, { recursive: true, force: true });
  });

  it('with --json, a missing or unknown command and a flag the parser refuses are JSON usage errors on stderr, nothing on stdout, exit 2', async () => {
    const cli = await bundledCli();
    for (const [args, mentions] of [[['--json'], /missing command/], [['shwo', 'run_1', '--json'], /unknown command "shwo"/]] as const) {
      const r = await runNode(cli, [...args]);
      expect(r.code).toBe(2);
      // Before: the whole help text on stdout (no command), or the unknown command and the help as text.
      expect(r.stdout).toBe('');
      expect(JSON.parse(r.stderr)).toMatchObject({ error: { code: 'usage', message: expect.stringMatching(mentions) } });
    }
    for (const args of [['gc', '--keep', '-1', '--json'], ['show', 'run_a', '--json', '--nope']]) {
      const r = await runNode(cli, args);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      // Before: "berth: Option '--keep' argument is ambiguous." and the synopsis, as text.
      const err = JSON.parse(r.stderr) as { error: { code: string; message: string; retryable: boolean } };
      expect(err.error.code).toBe('usage');
      expect(err.error.retryable).toBe(false);
      expect(err.error.message).toMatch(/--keep|--nope/);
    }
  });
});

describe('an engine that cannot be reached', { timeout: 120_000 }, () => {
  it('berth run names where it tried and what to check, and creates no run', async () => {
    const fx = await planFixture([{ name: 'one', run: 'true' }]);
    try {
      const sock = join(fx.dir, 'no-such.sock');
      const r = await fx.cli(['run', fx.plan], { DOCKER_HOST: `unix://${sock}` });
      expect(r.code).toBe(1);
      // Before: "engine_unreachable: read engine info: Docker engine unreachable (ENOENT)".
      expect(r.stderr).toContain(`Docker engine unreachable at ${sock} (ENOENT): no socket there; is dockerd running, and is DOCKER_HOST right?`);
      expect(existsSync(fx.store) ? await fx.read((s) => s.listRuns()) : []).toEqual([]);
    } finally {
      await fx.cleanup();
    }
  });
});

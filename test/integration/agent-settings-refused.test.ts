import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cliWorld, type CliWorld } from '../support/agent-cli-world';

let w: CliWorld | undefined;
afterEach(async () => {
  await w?.cleanup();
  w = undefined;
});

describe('berth agent with settings it cannot take', { timeout: 120_000 }, () => {
  it('refuses a base URL carrying credentials or not a URL, naming the field and its flag, and creates no run (the credentials never reach the store)', async () => {
    w = await cliWorld([]);
    const args = (url: string) => ['agent', 'hi', '--env', join(w!.dir, 'env.yaml'), '--model', 'm', '--base-url', url, '--api-key-env', 'TEST_MODEL_KEY'];
    const creds = await w.cli(args(`http://u:hunter2@127.0.0.1:${new URL(w.model.url).port}/v1`));
    // Before: 'berth: internal error: [ { "code": "custom", ... } ]' for a bad URL; credentials in one were stored with the run.
    expect(creds.code, creds.stderr).toBe(1);
    expect(creds.stderr).toContain('invalid_settings: invalid agent settings (1 problem):\n  model.baseUrl (--base-url): an endpoint without credentials');
    expect(creds.stderr).not.toContain('hunter2');
    const key = await w.cli(args(`${w.model.url}?api-key=s3cret`));
    expect(key.stderr).toContain('model.baseUrl (--base-url): an endpoint without credentials');
    const bad = await w.cli(args('notaurl'));
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('model.baseUrl (--base-url): Invalid URL');
    expect(bad.stderr).not.toContain('internal error');
    expect(w.model.requests.length).toBe(0);
    if (existsSync(w.store)) {
      expect(await w.read((s) => s.listRuns())).toEqual([]);
      expect(readFileSync(w.store).includes('hunter2')).toBe(false);
    }
  });
});

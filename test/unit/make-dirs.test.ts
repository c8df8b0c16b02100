import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadOrCreateToken } from '../../host/serve/auth';
import { openSqliteStore } from '../../host/store';

let dir = '';
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = '';
});

// Each of these spun at full CPU for ever in Node's recursive mkdir before (the test timed out).
describe('a path the user names whose directory cannot be made', () => {
  it('a --store under /proc is store_open_failed naming the directory, at once', () => {
    expect(() => openSqliteStore('/proc/berth-no-such-dir/berth.db')).toThrow(expect.objectContaining({ code: 'store_open_failed', message: 'cannot use store /proc/berth-no-such-dir/berth.db: cannot create /proc/berth-no-such-dir (ENOENT)' }));
  }, 10_000);

  it('a --token-file under /proc or below a file is token_file_unwritable naming why; the file in the way is left as it was', () => {
    expect(() => loadOrCreateToken('/proc/berth-no-such-dir/tok')).toThrow(expect.objectContaining({ code: 'token_file_unwritable', message: expect.stringContaining('cannot create /proc/berth-no-such-dir') }));
    dir = mkdtempSync(join(tmpdir(), 'berth-make-dirs-'));
    const file = join(dir, 'plan.yaml');
    writeFileSync(file, 'name: x\n');
    expect(() => loadOrCreateToken(join(file, 'tok'))).toThrow(expect.objectContaining({ code: 'token_file_unwritable', message: expect.stringContaining(`${file} is a file, not a directory`) }));
    expect(readFileSync(file, 'utf8')).toBe('name: x\n');
    // And a missing parent is still made, as before.
    expect(loadOrCreateToken(join(dir, 'a', 'b', 'tok')).created).toBe(true);
  }, 10_000);
});

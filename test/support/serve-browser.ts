import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { bundledCli } from './plan-fixture';

/** Debian's chromium (installed by .ci/setup-chromium); Playwright never downloads a browser here. */
export const CHROMIUM = '/usr/bin/chromium';
process.env.PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD = '1';

/** Headless Debian chromium with the flags the closed network needs (shared/DOCKER-NOTES.md "Browser"). */
export async function launchChromium(extraArgs: string[] = []): Promise<{ browser: Browser; close(): Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), 'berth-chromium-'));
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', `--disk-cache-dir=${profile}`, ...extraArgs],
  });
  return {
    browser,
    async close() {
      await browser.close().catch(() => {});
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Where a browser test keeps its screenshots (git-ignored). */
export function testOutputDir(name: string): string {
  const dir = join(process.cwd(), 'test-output', name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** `berth serve --port 0` on a store, as a child process; resolves with its URL, the token it printed and a link signing in with it. */
export async function startServeChild(store: string, hostId: string, extra: string[] = [], env: Record<string, string> = {}): Promise<{ child: ChildProcess; url: string; login: string | null; token: string | null; output: () => string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, [await bundledCli(), 'serve', '--port', '0', '--store', store, ...extra], { env: { ...process.env, BERTH_HOST_ID: hostId, BERTH_OPERATOR: 'web-tester', ...env } });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  for (let waited = 0; !/berth serve: http/.test(out); waited += 50) {
    if (child.exitCode !== null || waited > 60_000) throw new Error(`berth serve did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const url = /berth serve: (http:\/\/\S+)/.exec(out)![1]!;
  // Printed once, at the first start: the sign-in page and the token (a link holding it stayed in the browser's history).
  const token = /\/login\?token=([0-9a-f]+)/.exec(out)?.[1] ?? /^sign in at \S+ with this token[^\n]*\n\s+([0-9a-f]{64})$/m.exec(out)?.[1] ?? null;
  // A link that signs a test's browser in in one step (the server still takes one; nothing prints it).
  const login = token ? `${url}/login?token=${token}` : null;
  return {
    child,
    url,
    login,
    token,
    output: () => out,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

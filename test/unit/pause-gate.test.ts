import { describe, expect, it } from 'vitest';
import { beginPause, gatedExec, gatedPause } from '../../host/sandbox/pause-gate';

const tick = () => new Promise<void>((r) => setImmediate(r));

describe('pause gate', () => {
  it('an exec of this process waits while a pause of the same container is on, and runs when it ends', async () => {
    const end = await beginPause('c1');
    let ran = false;
    const exec = gatedExec('c1', async () => {
      ran = true;
    });
    for (let i = 0; i < 5; i++) await tick();
    expect(ran).toBe(false);
    end();
    await exec;
    expect(ran).toBe(true);
  });

  it('a pause waits for an exec already started to end, and no new exec starts meanwhile', async () => {
    const order: string[] = [];
    let finish!: () => void;
    const first = gatedExec('c2', () => new Promise<void>((r) => (finish = () => (order.push('exec 1 ended'), r()))));
    await tick();
    const pause = gatedPause('c2', async () => {
      order.push('paused');
    });
    await tick();
    const second = gatedExec('c2', async () => {
      order.push('exec 2');
    });
    for (let i = 0; i < 5; i++) await tick();
    expect(order).toEqual([]);
    finish();
    await Promise.all([first, pause, second]);
    expect(order).toEqual(['exec 1 ended', 'paused', 'exec 2']);
  });

  it('another container is not held up by a pause', async () => {
    const end = await beginPause('c3');
    await expect(gatedExec('c4', async () => 'ran')).resolves.toBe('ran');
    end();
  });
});

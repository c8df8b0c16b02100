import { describe, expect, it } from 'vitest';
import { enterExecSetup, holdPause, releaseHeld, takeHeld, underPause } from '../../host/sandbox/exec-gate';

const tick = () => new Promise((r) => setImmediate(r));

describe('exec setups and pauses of one container never overlap in a process', () => {
  it('a pause waits until every exec in setup has left it', async () => {
    const leaveA = await enterExecSetup('c1');
    const leaveB = await enterExecSetup('c1');
    let paused = false;
    const pause = holdPause('c1').then((release) => ((paused = true), release));
    await tick();
    expect(paused).toBe(false);
    leaveA();
    leaveA(); // twice is harmless
    await tick();
    expect(paused).toBe(false);
    leaveB();
    (await pause)();
    expect(paused).toBe(true);
  });

  it('an exec waits while a pause holds, and other containers are not held up', async () => {
    const release = await holdPause('c2');
    let entered = false;
    const exec = enterExecSetup('c2').then((leave) => ((entered = true), leave));
    (await enterExecSetup('c3'))();
    await tick();
    expect(entered).toBe(false);
    release();
    (await exec)();
    expect(entered).toBe(true);
  });

  it("a commit inside this process's own pause does not wait on that pause", async () => {
    await takeHeld('c4');
    expect(await underPause('c4', async () => 'committed')).toBe('committed');
    let entered = false;
    const exec = enterExecSetup('c4').then((leave) => ((entered = true), leave));
    await tick();
    expect(entered).toBe(false);
    releaseHeld('c4');
    (await exec)();
    expect(entered).toBe(true);
  });
});

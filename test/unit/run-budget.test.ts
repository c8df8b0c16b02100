import { describe, expect, it } from 'vitest';
import { EnvironmentSchema } from '../../environment';
import { CommandBudget, refusedUntouched } from '../../host/agent/run-budget';
import type { ExecResult } from '../../host/sandbox';

const env = EnvironmentSchema.parse({ kernel: { name: 'berth', version: '0.1.0', compatible: '^0.1.0' }, image: { ref: 'berth/tiny:latest' }, resources: { runBudgetS: 2 } });
const answer = (timedOut: boolean) => ({ timedOut }) as ExecResult;

describe("a call's share of the run budget (CommandBudget)", () => {
  it('gives each command a deadline where what is left runs out, on the clock it is counted with', () => {
    const b = new CommandBudget(2000, env, 500);
    // The plan used 500 of the 2000: the command asked for at t=10 000 may run until 11 500, whatever its own timeout.
    expect(b.limit({ timeoutMs: 60_000 }, 10_000)).toEqual({ timeoutMs: 60_000, deadline: 11_500 });
    b.counted(1600, answer(true));
    expect(b.usedMs).toBe(2100);
    expect(b.stopped).toBe(true);
  });

  it('refuses any use with nothing left, untouched when nothing ran', () => {
    const b = new CommandBudget(1000, env, 1000);
    expect(() => b.assertLeft()).toThrow(/this call did not run: the run's commands used up its budget of 2 s \(resources\.runBudgetS/);
    let err: unknown;
    try {
      b.limit({}, 0);
    } catch (e) {
      err = e;
    }
    expect(refusedUntouched(err)).toBe(true);
  });

  it('a command that timed out by itself with budget left was not stopped by the budget', () => {
    const b = new CommandBudget(5000, env);
    b.counted(1200, answer(true));
    expect(b.stopped).toBe(false);
  });

  it('while settling an earlier attempt (verify), counts but neither cuts nor refuses', () => {
    const b = new CommandBudget(1000, env, 1000);
    b.settling = true;
    expect(b.limit({ timeoutMs: 30_000 }, 0)).toEqual({ timeoutMs: 30_000 });
    b.counted(300, answer(true));
    expect(b.usedMs).toBe(1300);
    expect(b.stopped).toBe(false);
  });
});

import { describe, expect, it } from 'vitest';
import { driverOf, hostView } from '../../host/cli/commands/run-driver';
import type { Run } from '../../host/model';
import type { SessionOwner } from '../../host/store';

const owner: SessionOwner = { sessionId: 'ses_1', epoch: 3, holder: 'other-machine', pid: 42, takenAt: 0, heartbeatAt: 1_000, leaseUntil: 31_000, stoppedAt: null };
const run = { id: 'run_1', state: 'running', updatedAt: 0 } as Run;

describe('who drives a run', () => {
  it('an owner on another machine is live while its lease holds on the database clock and gone after that, without asking about its pid', () => {
    const never = () => {
      throw new Error('a pid of another machine is not checked here');
    };
    expect(hostView(owner, 30_000, 'this-machine', never)!.live).toBe(true);
    const expired = hostView(owner, 31_001, 'this-machine', never)!;
    expect(expired.live).toBe(false);
    expect(driverOf(run, expired, 1_000 + 5 * 60_000).line).toBe('running, no live host (stopped 5m00s ago): berth resume run_1');
  });

  it('a local owner whose process is gone is not live even inside its lease; a released one is not live; a final run needs no host', () => {
    const view = hostView({ ...owner, holder: 'me' }, 2_000, 'me', () => false)!;
    expect(view.live).toBe(false);
    expect(hostView({ ...owner, stoppedAt: 1_500 }, 2_000, 'this-machine', () => true)!.live).toBe(false);
    expect(driverOf({ ...run, state: 'completed' }, view, 2_000)).toEqual({ owner: null, line: 'completed' });
  });

  it('a run no host has claimed yet (a detached submit) waits for one: the line says so and since when it was submitted, not that a host stopped', () => {
    const submitted = { id: 'run_1', state: 'admitted', createdAt: 1_000, updatedAt: 1_000 } as Run;
    expect(driverOf(submitted, null, 1_000 + 2 * 60_000).line).toBe('admitted, not claimed by any host yet (submitted 2m00s ago): a berth worker claims it, or berth resume run_1');
  });
});

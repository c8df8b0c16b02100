import { describe, expect, it } from 'vitest';
import { driverOf, hostView, STALE_HEARTBEAT_MS } from '../../host/cli/commands/run-driver';
import type { Run } from '../../host/model';

const right = { scope: 'kernel', epoch: 3, holder: 'other-machine', pid: 42, takenAt: 0, heartbeatAt: 1_000, stoppedAt: null };
const run = { id: 'run_1', state: 'running', updatedAt: 0 } as Run;

describe('who drives a run', () => {
  it('a host on another machine is live while its heartbeat is fresh and stale after that, without asking about its pid', () => {
    const never = () => {
      throw new Error('a pid of another machine is not checked here');
    };
    expect(hostView(right, 1_000 + 2_000, 'this-machine', never)!.live).toBe(true);
    const stale = hostView(right, 1_000 + STALE_HEARTBEAT_MS + 1, 'this-machine', never)!;
    expect(stale.live).toBe(false);
    expect(driverOf(run, stale, 1_000 + 5 * 60_000).line).toBe('running, no live host (stopped 5m00s ago): berth resume run_1');
  });

  it('a local host whose process is gone is not live even with a fresh heartbeat; a final run needs no host', () => {
    const view = hostView({ ...right, holder: 'me' }, 2_000, 'me', () => false)!;
    expect(view.live).toBe(false);
    expect(driverOf({ ...run, state: 'completed' }, view, 2_000)).toEqual({ owner: null, line: 'completed' });
  });
});

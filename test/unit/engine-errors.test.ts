import { describe, expect, it } from 'vitest';
import { isConflict, isRemovalInProgress } from '../../host/sandbox/engine-errors';

/** The error dockerode gave a sweep of eight parallel `berth run`s on one store (Debian docker.io 20.10.24, captured 2026-12-04). */
const racing = Object.assign(new Error('(HTTP code 409) unexpected - removal of container 1d5645d2d3b0546da29d55eb046041b7881bcbc2848e2fd956423212feef12c3 is already in progress '), {
  statusCode: 409,
  json: { message: 'removal of container 1d5645d2d3b0546da29d55eb046041b7881bcbc2848e2fd956423212feef12c3 is already in progress' },
});

describe('engine errors a sweep meets', () => {
  it('takes a removal another process already started for done, not for a failure worth a warning', () => {
    expect(isRemovalInProgress(racing)).toBe(true);
    expect(isRemovalInProgress({ statusCode: 409, json: { message: 'removal of container abc is already in progress' } })).toBe(true);
  });

  it('keeps every other conflict a failure: a paused container, a container in use', () => {
    const paused = { statusCode: 409, message: '(HTTP code 409) unexpected - Container abc is paused, unpause the container before stopping or killing' };
    expect(isConflict(paused)).toBe(true);
    expect(isRemovalInProgress(paused)).toBe(false);
    expect(isRemovalInProgress({ statusCode: 500, message: 'removal of container abc is already in progress' })).toBe(false);
    expect(isRemovalInProgress(undefined)).toBe(false);
  });
});

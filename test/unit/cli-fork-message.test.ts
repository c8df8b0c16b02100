import { describe, expect, it } from 'vitest';
import { stepsHere } from '../../host/cli/commands/fork';

describe('berth fork says which steps the fork runs', () => {
  it('names the remaining steps 1-based, a single one alone, and none for a fork at the plan\'s end (it said "steps 3-2")', () => {
    expect(stepsHere(0, 3)).toBe('steps 1-3 run here');
    expect(stepsHere(1, 3)).toBe('steps 2-3 run here');
    expect(stepsHere(2, 3)).toBe('step 3 runs here');
    expect(stepsHere(2, 2)).toBe('no step is left to run: it forks at the end of the plan, so it completes at once');
  });
});

import { HandlerRegistry } from '../../host/kernel';

/**
 * A registry with one kernel-only task kind, `stepper`: `steps` durable transitions, each its own
 * commit with the step count as its checkpoint, then complete with `{ steps }`.
 */
export function stepperRegistry(steps: number): HandlerRegistry {
  const registry = new HandlerRegistry();
  registry.register({
    kind: 'stepper',
    version: 1,
    initialPhase: 'step',
    phases: {
      step: async (ctx) => {
        const i = (ctx.checkpoint as { i: number } | null)?.i ?? 0;
        return i + 1 >= steps ? { type: 'complete', result: { steps: i + 1 } } : { type: 'next', phase: 'step', checkpoint: { i: i + 1 } };
      },
    },
  });
  return registry;
}

import type { HandlerRegistry } from '../host/kernel';

/** Kernel-only task kinds of the fleet bench (no sandbox): a short run, and a long stepper to kill mid-run. */
export function registerFleetKinds(registry: HandlerRegistry): void {
  registry.register({
    kind: 'fleet-short',
    version: 1,
    initialPhase: 'a',
    phases: {
      a: async () => ({ type: 'next', phase: 'b', checkpoint: { a: true } }),
      b: async () => ({ type: 'next', phase: 'c', checkpoint: { b: true } }),
      c: async () => ({ type: 'complete', result: { ok: true } }),
    },
  });
  registry.register({
    kind: 'fleet-stepper',
    version: 1,
    initialPhase: 'step',
    phases: {
      step: async (ctx) => {
        const i = (ctx.checkpoint as { i: number } | null)?.i ?? 0;
        await new Promise((r) => setTimeout(r, 20));
        return i + 1 >= 100_000 ? { type: 'complete', result: { steps: i + 1 } } : { type: 'next', phase: 'step', checkpoint: { i: i + 1 } };
      },
    },
  });
}

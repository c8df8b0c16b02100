import type { EffectVerifier, TaskHandler } from './handler';

/** Handlers by kind and version. A saved task runs only under a handler that accepts its version. */
export class HandlerRegistry {
  private readonly byKind = new Map<string, TaskHandler[]>();
  private readonly listeners = new Set<(h: TaskHandler) => void>();
  private readonly verifiers = new Map<string, EffectVerifier>();

  /**
   * How to ask the outside world whether an effect of `kind` happened, from its stored intent
   * alone: what `berth reconcile --verify` runs for an effect left `unknown`, long after the task
   * that performed it ended.
   */
  registerVerifier(kind: string, verify: EffectVerifier): void {
    if (this.verifiers.has(kind)) throw new Error(`a verifier for effect kind ${kind} is already registered`);
    this.verifiers.set(kind, verify);
  }

  verifier(kind: string): EffectVerifier | undefined {
    return this.verifiers.get(kind);
  }

  register(handler: TaskHandler): void {
    const list = this.byKind.get(handler.kind) ?? [];
    if (list.some((h) => h.version === handler.version)) {
      throw new Error(`handler ${handler.kind}@${handler.version} is already registered`);
    }
    if (!handler.phases[handler.initialPhase]) {
      throw new Error(`handler ${handler.kind}@${handler.version} has no initial phase "${handler.initialPhase}"`);
    }
    list.push(handler);
    list.sort((a, b) => b.version - a.version);
    this.byKind.set(handler.kind, list);
    for (const l of this.listeners) l(handler);
  }

  /** Exact version first, then a handler that declares it accepts the version. */
  find(kind: string, version: number): TaskHandler | undefined {
    const list = this.byKind.get(kind) ?? [];
    return list.find((h) => h.version === version) ?? list.find((h) => h.accepts?.includes(version));
  }

  /** Newest version of a kind, used when spawning without a version. */
  newest(kind: string): TaskHandler | undefined {
    return this.byKind.get(kind)?.[0];
  }

  /** Why a task of this kind and version cannot run, or null when it can. */
  blockedReason(kind: string, version: number, phase: string): string | null {
    const handler = this.find(kind, version);
    if (!handler) {
      const known = (this.byKind.get(kind) ?? []).map((h) => h.version);
      return known.length
        ? `no handler for ${kind}@${version} (registered versions: ${known.join(', ')})`
        : `no handler registered for kind ${kind}`;
    }
    if (!handler.phases[phase]) return `handler ${kind}@${handler.version} has no phase "${phase}"`;
    return null;
  }

  onRegister(listener: (h: TaskHandler) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

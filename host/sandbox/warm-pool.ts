import type { Logger } from 'pino';
import { newId } from '../support/ids';
import type { Lease } from './lease';
import type { ProvisionedContainer, SandboxHost } from './sandbox-host';
import { checkSpec, type SandboxSpec } from './sandbox-spec';

export interface WarmPoolOptions {
  /** Idle containers kept ready. */
  size: number;
  logger?: Logger;
}

/**
 * Pre-started containers for one environment, so that a lease costs a record insert (synced with
 * the next commit) instead of a container start, and no engine call: the engine's event stream
 * says whether an idle container died. Pool containers hold no session data and no secrets: they are created with
 * `berth.pool=1` and empty session and lease labels. Docker cannot relabel a container, so when
 * one is assigned the session lives only in the lease record (the sweeper and verify go by the
 * record's container id, never by the session label).
 *
 * Liveness for the sweeper: an idle pool container has no lease record. The host's sweeper keeps
 * unrecorded containers whose `berth.instance` label is its own instance (its live pools, its
 * leases in flight); an unrecorded pool container of any other instance belongs to a dead
 * incarnation and is removed as `unknown`. Idle containers whose removal failed on close are
 * handed to the sweeper explicitly.
 */
export class WarmPool {
  private readonly idle: ProvisionedContainer[] = [];
  private filling = 0;
  private closed = false;
  private refill: Promise<void> = Promise.resolve();
  private readonly logger: Logger | undefined;

  constructor(
    private readonly host: SandboxHost,
    private readonly spec: SandboxSpec,
    private readonly size: number,
    logger?: Logger,
  ) {
    checkSpec(spec);
    this.logger = logger;
    this.topUp();
  }

  /** Idle containers ready right now. */
  get available(): number {
    return this.idle.length;
  }

  /** Resolves when the pool has been filled to its size (or filling failed, which is logged). */
  async ready(): Promise<void> {
    let current: Promise<void>;
    do {
      current = this.refill;
      await current;
    } while (current !== this.refill);
  }

  /**
   * Assigns an idle container to a session (inserting its lease record) and refills in the
   * background. With no idle container left it falls back to a cold lease.
   */
  async lease(options: { sessionId: string; signal?: AbortSignal; autoHeartbeat?: boolean }): Promise<Lease> {
    while (!this.closed) {
      const p = this.idle.shift();
      if (!p) break;
      this.topUp();
      // The event stream watched it since before it started (its watchdog ends an idle one after
      // the TTL); only when the stream could not say does the engine get asked.
      const running =
        p.exit?.running() ??
        (await p.container.inspect().then(
          (i) => i.State.Running,
          () => false,
        ));
      if (!running) {
        await this.host.discard(p);
        continue;
      }
      try {
        return await this.host.adopt(this.spec, p, newId('lease'), options);
      } catch (err) {
        await this.host.discard(p);
        throw err;
      }
    }
    this.logger?.info({ envFingerprint: this.spec.envFingerprint }, 'warm pool empty; leasing cold');
    return this.host.lease(this.spec, options);
  }

  /** Stops refilling and removes the idle containers. Leases already handed out are unaffected. */
  async close(): Promise<void> {
    this.closed = true;
    await this.refill;
    const idle = this.idle.splice(0);
    await Promise.all(idle.map((p) => this.host.discard(p)));
  }

  private async dropDead(p: ProvisionedContainer): Promise<void> {
    const i = this.idle.indexOf(p);
    if (i === -1) return;
    this.idle.splice(i, 1);
    this.logger?.info({ containerId: p.id }, 'an idle warm pool container ended; replacing it');
    await this.host.discard(p);
    this.topUp();
  }

  private topUp(): void {
    if (this.closed || this.filling > 0) return;
    this.refill = this.fill();
  }

  /** One container at a time: a burst of leases must not start a burst of containers. */
  private async fill(): Promise<void> {
    while (!this.closed && this.idle.length < this.size) {
      this.filling += 1;
      try {
        const p = await this.host.provision(this.spec, {});
        if (this.closed) await this.host.discard(p);
        else {
          this.idle.push(p);
          // An idle container that ends (its watchdog after the TTL, a `docker kill`) makes room for a new one.
          p.exit?.onExit(() => void this.dropDead(p));
        }
      } catch (err) {
        this.logger?.warn({ err }, 'warm pool could not start a container');
        return;
      } finally {
        this.filling -= 1;
      }
    }
  }
}

/** Starts a warm pool of `size` containers for `spec` on `host`. */
export function createWarmPool(host: SandboxHost, spec: SandboxSpec, options: WarmPoolOptions): WarmPool {
  return new WarmPool(host, spec, options.size, options.logger);
}

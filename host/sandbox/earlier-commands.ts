import type Dockerode from 'dockerode';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { CONTROL_DIR, EXEC_REGISTRY_DIR } from './container-options';
import { isNotFound } from './engine-errors';
import type { ExecActivity } from './exec-activity';
import { WRAPPER_NAME } from './exec-scripts';
import { COUNTERS, KEPT_FILE, PROC_LIB } from './process-scripts';
import { runControl, runScript } from './sandbox-control';

/** One command an earlier host started in the sandbox, as {@link stopEarlierCommands} found it. */
export interface EarlierCommand {
  /** The engine's exec id. */
  execId: string;
  /** `ExecOptions.tag` as the earlier host passed it; undefined when it passed none. */
  tag: string | undefined;
  keepProcesses: boolean;
  /**
   * `killed`: it was still running and is stopped now (never `exitCode`: it did not end by itself).
   * `ended`: it had ended before, with `exitCode` when the engine still knows it.
   */
  state: 'killed' | 'ended';
  exitCode?: number;
}

/** What a new owner learns, and has done, about the commands an earlier host started. */
export interface EarlierCommands {
  /**
   * `stopped`: nothing an earlier host started runs any more, kept processes aside.
   * `unstoppable`: something survived the kills until the wait ran out: remove the container.
   */
  outcome: 'stopped' | 'unstoppable';
  commands: EarlierCommand[];
  /** Processes of `keepProcesses` commands, left running on purpose. */
  kept: Array<{ pid: number; name: string }>;
  /** Processes killed by this call. */
  killedProcesses: number;
}

/**
 * Run as root: makes the control mounts of a container that predates them (only root can create
 * anything in /dev), removes stale secret directories when `$0` is `clean`, then lists what an
 * `earlier` kill would take (`p PID UID`), the kept processes (`k PID NAME`), the exec registry
 * (`e ID`; not an entry marked forgotten, `ID.ok`, nor the mark itself), `s` when /dev/shm/berth-secrets (older versions' secret files) exists, and the counters.
 */
const LIST_SCRIPT = `
${PROC_LIB}
[ -d ${CONTROL_DIR} ] || mkdir -m 0711 ${CONTROL_DIR} 2>/dev/null
[ -d ${EXEC_REGISTRY_DIR} ] || mkdir -m 0733 ${EXEC_REGISTRY_DIR} 2>/dev/null
if [ "$0" = clean ]; then for d in ${CONTROL_DIR}/*/; do [ -d "$d" ] && rm -rf "$d"; done; fi
[ -e /dev/shm/berth-secrets ] && echo s
pl_mode=earlier pl_spare="$*"
pl_prepare
for e in $pl_all; do
  p=\${e%%:*}; st=\${e##*:}
  [ "$p" = $$ ] && continue
  case $st in Z|X|x) continue ;; esac
  pl_is_target "$p" || continue
  u=
  while read -r k a rest; do [ "$k" = Uid: ] && { u=$a; break; }; done </proc/$p/status
  [ -n "$u" ] && echo "p $p $u"
done 2>/dev/null
if [ -r ${KEPT_FILE} ]; then
  while read -r kp ks; do pl_get "$kp" && [ "$g_start" = "$ks" ] && pst "$kp" && echo "k $kp $ps_comm"; done <${KEPT_FILE}
fi
for f in ${EXEC_REGISTRY_DIR}/*; do [ -f "$f" ] && [ ! -e "$f.ok" ] && echo "e \${f##*/}"; done
${COUNTERS}
`;

interface Listing {
  targets: Array<{ pid: number; uid: string }>;
  kept: Array<{ pid: number; name: string }>;
  registry: string[];
  oldSecrets: boolean;
  pidsMax: number | undefined;
  oomKill: number | undefined;
}

function parseListing(text: string): Listing {
  const l: Listing = { targets: [], kept: [], registry: [], oldSecrets: false, pidsMax: undefined, oomKill: undefined };
  for (const line of text.split('\n')) {
    const [kind, a, ...rest] = line.trim().split(' ');
    if (kind === 'p' && /^\d+$/.test(a ?? '') && /^\d+$/.test(rest[0] ?? '')) l.targets.push({ pid: Number(a), uid: rest[0]! });
    else if (kind === 'k' && /^\d+$/.test(a ?? '')) l.kept.push({ pid: Number(a), name: rest.join(' ') });
    else if (kind === 'e' && /^[0-9a-f]{64}$/.test(a ?? '')) l.registry.push(a!);
    else if (kind === 's') l.oldSecrets = true;
    const kv = /^(pids_max|oom_kill)=(\d+)$/.exec(line.trim());
    if (kv) l[kv[1] === 'pids_max' ? 'pidsMax' : 'oomKill'] = Number(kv[2]);
  }
  return l;
}

/** What the engine knows of one exec; undefined when it is not a berth command of this container. */
async function inspectCommand(docker: Dockerode, containerId: string, execId: string): Promise<{ running: boolean; exitCode: number | null; tag: string | undefined; keep: boolean } | undefined> {
  const info = await docker.getExec(execId).inspect().catch((err: unknown) => (isNotFound(err) ? undefined : Promise.reject(err)));
  if (!info || info.ContainerID !== containerId) return undefined;
  const args = info.ProcessConfig?.arguments ?? [];
  if (args[0] !== '-c' || args[2] !== WRAPPER_NAME) return undefined;
  return { running: info.Running, exitCode: info.ExitCode ?? null, tag: args[4] ? args[4] : undefined, keep: args[3] === '1' };
}

/** What {@link stopEarlierCommands} needs from its lease. */
export interface EarlierHost {
  docker: Dockerode;
  container: Dockerode.Container;
  containerId: string;
  owner: string;
  activity: ExecActivity;
  logger: Logger;
  /** What earlier calls found, by exec id: a command killed by one call stays `killed`. */
  known: Map<string, EarlierCommand>;
}

const POLL_MS = 100;

/**
 * Kills every process in the container that this lease did not start (its running commands are
 * spared), except init, the idle loop and the kept processes, waits until they are gone and the
 * engine has seen their execs end, and reports each earlier berth command: running ones (the
 * engine lists them on the container) and ended ones (the exec registry names them; the engine
 * says how they ended). Kills run as each process's user; `clean` also removes stale secret
 * directories (right only while this lease runs nothing). The counters are returned as a baseline.
 */
export async function stopEarlierCommands(
  h: EarlierHost,
  opts: { signal?: AbortSignal; waitMs?: number; clean?: boolean },
): Promise<EarlierCommands & { counters: { pidsMax: number | undefined; oomKill: number | undefined } }> {
  const deadline = Date.now() + (opts.waitMs ?? 10_000);
  const spare = () => h.activity.roots();
  const list = async (clean: boolean) => parseListing(await runScript(h.container, LIST_SCRIPT, [clean ? 'clean' : 'list', ...spare()], '0:0'));
  opts.signal?.throwIfAborted();
  const running = ((await h.container.inspect()).ExecIDs ?? []).filter((id) => !h.activity.started.has(id));
  let listing = await list(opts.clean === true);
  const first = listing;
  const found = new Map<string, NonNullable<Awaited<ReturnType<typeof inspectCommand>>>>();
  for (const id of new Set([...running, ...listing.registry])) {
    if (h.activity.started.has(id) || h.known.has(id)) continue;
    const c = await inspectCommand(h.docker, h.containerId, id);
    if (c) found.set(id, c);
  }
  let killedProcesses = 0;
  // Nothing to kill (no process but the sandbox's own and the kept ones, no earlier command the
  // engine still runs): that listing is the proof, and listing again after no kill would only
  // repeat it, one more exec (70-220 ms, by the load) in every attach: each resume, take-over and
  // MCP reconnect. What an earlier owner could start after it, it could start after a second
  // listing as well: such an owner is kept out by the session's fence (its commits are refused),
  // never by listing twice.
  let stopped = listing.targets.length === 0 && !listing.oldSecrets && ![...found.values()].some((c) => c.running);
  while (!stopped) {
    const uids = [...new Set(listing.targets.map((t) => t.uid))];
    if (listing.oldSecrets && !uids.includes(h.owner.split(':')[0]!)) uids.push(h.owner.split(':')[0]!);
    for (const uid of uids) {
      const r = await runControl(h.container, { user: uid, action: { mode: 'earlier', spare: spare() } });
      killedProcesses += r.killed ?? 0;
    }
    const alive = await Promise.all([...found].filter(([, c]) => c.running).map(([id]) => h.docker.getExec(id).inspect().then((i) => i.Running, () => false)));
    listing = await list(false);
    if (listing.targets.length === 0 && !alive.includes(true)) {
      stopped = true;
      break;
    }
    if (Date.now() > deadline) break;
    opts.signal?.throwIfAborted();
    await sleep(POLL_MS);
  }
  for (const [execId, c] of found) {
    let state: EarlierCommand['state'] = c.running ? 'killed' : 'ended';
    let exitCode = c.running ? null : c.exitCode;
    // It may have ended by itself between the listing and the kill: then it was not killed.
    if (c.running) {
      const after = await inspectCommand(h.docker, h.containerId, execId).catch(() => undefined);
      if (after && !after.running && after.exitCode !== null && after.exitCode !== 137) [state, exitCode] = ['ended', after.exitCode];
    }
    h.known.set(execId, { execId, tag: c.tag, keepProcesses: c.keep, state, ...(state === 'ended' && exitCode !== null ? { exitCode } : {}) });
  }
  if (!stopped) h.logger.error({ left: listing.targets }, 'processes an earlier host started survived the kills; the container should be removed');
  return {
    outcome: stopped ? 'stopped' : 'unstoppable',
    commands: [...h.known.values()],
    kept: listing.kept,
    killedProcesses,
    counters: { pidsMax: first.pidsMax, oomKill: first.oomKill },
  };
}

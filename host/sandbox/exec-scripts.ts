/**
 * Shell scripts run by busybox (or any POSIX) `sh` inside the sandbox: the wrapper every command
 * runs under and the control script that kills. Process handling is in process-scripts.ts.
 */
import { EXEC_REGISTRY_DIR } from './container-options';
import { COUNTERS, KEPT_FILE, PROC_LIB, WRAPPER_MARK } from './process-scripts';

/**
 * The `oom_score_adj` of every command (any process may raise its own; lowering needs a capability
 * the sandbox does not have). At the memory limit the kernel kills the process with the most
 * memory, and memory no process holds (a file in /dev/shm, pipe buffers) leaves only small ones,
 * where docker-init and the idle loop had about the shell's size: filling /dev/shm to the limit
 * killed init and stopped the sandbox (3 of 3), and under CI's load a second kill after an
 * OOM-killed `tail` took the sandbox down too (the memory-limit test's exit -1). Raised by half the
 * limit, a command's processes always go before the sandbox's own.
 */
export const COMMAND_OOM_SCORE_ADJ = 500;

/** `$0` of every command wrapper; its ProcessConfig reads `-c WRAPPER berth-exec KEEP TAG ...argv`. */
export const WRAPPER_NAME = 'berth-exec';

/**
 * Runs the command (`"$@"` after `$1` keep flag and `$2` tag). Its first stdin line, written by the
 * host, is `<exec id> <1 when the command has stdin> <exec ids to forget>`: the wrapper records its
 * exec id in the exec registry (a directory no command can list, so a later host finds the
 * commands whose end it may not have seen) and forgets the entries of commands whose results the
 * host has. A plain id is forgotten by an empty `<id>.ok` beside its entry (a redirection, which
 * the shell makes itself: an `rm` per exec was a fork and exec of its own in the container, about
 * 6% of a short exec's wall time at load 10); a `-<id>` removes the entry and its mark. The host
 * sends the removals in batches (exec-activity.ts), so a wrapper runs `rm` once in many execs, and
 * a listing skips marked entries (earlier-commands.ts). Its first stdout line, `berth-exec <pid> <start time>`, printed before the command
 * exists (so the command cannot forge it) and taken off the output by the host, names the process
 * a kill must take. When the command ends the wrapper kills what it left (a sweep of the process
 * list: `setsid` does not save a process), unless `$1` is 1 (`keepProcesses`), and exits with the
 * command's status (128+n for a death by signal n, as the engine reports it).
 *
 * The sweep is skipped when init has one child (its `children` file names one pid): a leftover's
 * ancestry reaches init directly (see process-scripts.ts), so its top would be a second child, and
 * the one child is the idle loop, an anchor, by the sweep's own rule (init's first-started child).
 * The command was reaped before the read, and an orphan is reparented before its parent can be
 * reaped, so every leftover of it is under a child of init by then. The full scan reads every
 * process's stat one byte per syscall (busybox `read`): about 1 ms of CPU per exec for five
 * processes, most of what the wrapper cost an exec beside a bare `sh -c` (bench/RESULTS.md,
 * tool-egress). Unreadable (no CONFIG_PROC_CHILDREN) or anything else: the full sweep.
 *
 * The wrapper first raises its OOM score (inherited by the command, see COMMAND_OOM_SCORE_ADJ).
 */
export const WRAPPER_SCRIPT = `${WRAPPER_MARK}
${PROC_LIB}
read -r b_eid b_in b_forget || exit 0
b_keep=$1; shift 2
echo ${COMMAND_OOM_SCORE_ADJ} 2>/dev/null >/proc/self/oom_score_adj
case $b_eid in ''|*[!0-9a-f]*) ;; *) : 2>/dev/null >"${EXEC_REGISTRY_DIR}/$b_eid" ;; esac
b_rm=
for b_f in $b_forget; do case $b_f in -*) b_f=\${b_f#-}; case $b_f in ''|*[!0-9a-f]*) ;; *) b_rm="$b_rm ${EXEC_REGISTRY_DIR}/$b_f ${EXEC_REGISTRY_DIR}/$b_f.ok" ;; esac ;; *[!0-9a-f]*) ;; *) : 2>/dev/null >"${EXEC_REGISTRY_DIR}/$b_f.ok" ;; esac; done
[ -z "$b_rm" ] || rm -f $b_rm 2>/dev/null
pst $$ && echo "${WRAPPER_NAME} $$ $ps_start"
if [ "$b_in" = 1 ]; then "$@"; else "$@" </dev/null; fi
b_rc=$?
if [ "$b_keep" != 1 ]; then
  b_kids=; read -r b_kids 2>/dev/null </proc/1/task/1/children
  case $b_kids in ''|*[!0-9]*) pl_mode=sweep pl_spare=; pl_kill ;; esac
fi
exit $b_rc`;

/**
 * The control script, `$0` the mode, run as the user whose processes it may signal (the container
 * has no CAP_KILL, so root could signal no more):
 * - `counters`: only prints the cgroup counters;
 * - `tree PID:START`: kills the wrapper PID (if it still has that start time) and everything under it;
 * - `sweep`: kills the leftovers, as the wrapper does after its command;
 * - `earlier PID:START...`: kills everything but the anchors and the given exec roots (what an
 *   earlier host started), and removes /dev/shm/berth-secrets, where older versions kept secret files.
 * Prints `killed=<n>` (`none` for a tree no longer there), `found=<0|1>` and the counters.
 */
export const CONTROL_SCRIPT = `
${PROC_LIB}
pl_mode=$0 pl_spare= pl_target=
case $pl_mode in
  tree) pl_target=$1 ;;
  earlier) pl_spare="$*"; [ -e /dev/shm/berth-secrets ] && rm -rf /dev/shm/berth-secrets 2>/dev/null ;;
esac
if [ "$pl_mode" = counters ]; then
  echo killed=none
else
  pl_kill
  if [ "$pl_mode" = tree ] && [ -z "$pl_tree" ]; then echo killed=none; else echo "killed=$pl_killed"; fi
  echo "found=$pl_found"
fi
${COUNTERS}
`;

/**
 * Run as root after a `keepProcesses` command whose wrapper started at `$1` ended: records every
 * leftover that started since then as kept (`pid start`, appended: readers never see a file being
 * rewritten) in the kept file, which only root can write. Prints `kept=<pid>` for each.
 */
export const ADOPT_SCRIPT = `
${PROC_LIB}
pl_spare=
pl_scan; pl_anchors
k_since=$1
case $k_since in ''|*[!0-9]*) k_since=0 ;; esac
k_new=" "
for k_e in $pl_all; do
  k_p=\${k_e%%:*}; k_s=\${k_e##*:}
  case $k_s in Z|X|x) continue ;; esac
  pl_where "$k_p"
  [ $? = 1 ] || continue
  [ "$pl_top_start" -ge "$k_since" ] || continue
  case "$k_new" in *" $pl_top "*) continue ;; esac
  k_new="$k_new$pl_top "
  echo "$pl_top $pl_top_start" >>${KEPT_FILE} && echo "kept=$pl_top"
done
`;

export interface ControlReport {
  /** How many processes were killed; undefined when the target was gone or nothing was asked. */
  killed: number | undefined;
  /** Whether there was anything to kill. */
  found: boolean;
  /** Cumulative count of forks refused by the pids limit. */
  pidsMax: number | undefined;
  /** Cumulative count of OOM kills in the container's memory cgroup. */
  oomKill: number | undefined;
  /** False when the script never got to its report (it could not fork under a fork bomb). */
  complete: boolean;
}

/** The `key=value` lines of a control script's output, the last value of each key winning. */
export function reportValues(text: string): Map<string, string> {
  const values = new Map<string, string>();
  for (const line of text.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) values.set(line.slice(0, eq).trim(), line.slice(eq + 1).trim());
  }
  return values;
}

export function parseControlReport(text: string): ControlReport {
  const values = reportValues(text);
  const num = (key: string): number | undefined => {
    const v = values.get(key);
    if (v === undefined || v === '' || !/^\d+$/.test(v)) return undefined;
    return Number(v);
  };
  return { killed: num('killed'), found: values.get('found') === '1', pidsMax: num('pids_max'), oomKill: num('oom_kill'), complete: values.has('killed') };
}

/**
 * Shell snippets run by busybox (or any POSIX) `sh` inside the sandbox. They use only shell
 * builtins after start-up, so they keep working while a fork bomb holds every pid but a few.
 */

/**
 * Runs the command (`"$@"` after `$0` slot file, `$1` nonce, `$2` keep flag) after recording
 * `<pid> <nonce>` in the slot file. Docker starts each exec as a session leader (runc calls setsid),
 * so the wrapper's pid is the process group and session id of the whole tree the command spawns.
 * When the command ends, the wrapper kills every other process left in its session (unless `$2`
 * is 1: `keepProcesses`), removes the slot file and exits with the command's status (128+n for a
 * death by signal n, as the engine reports it). A scan of /proc with shell builtins costs a few ms
 * in the same exec, where a second exec would cost one more engine round trip. A command killed
 * with its wrapper (timeout, abort) is reaped by CONTROL_SCRIPT instead. stderr is redirected
 * before the slot file is opened, so a failed write never shows in the output.
 */
export const WRAPPER_SCRIPT = `echo "$$ $1" 2>/dev/null >"$0"; slot=$0 keep=$2; shift 2; "$@"; rc=$?
if [ "$keep" != 1 ]; then
  round=0
  while [ "$round" -lt 5 ]; do
    round=$((round + 1)); left=0
    for f in /proc/[0-9]*/stat; do
      read -r l 2>/dev/null <"$f" || continue
      p=\${f#/proc/}; p=\${p%/stat}
      [ "$p" = "$$" ] && continue
      l=\${l##*) }
      set -- $l
      [ "$1" = Z ] && continue
      if [ "$3" = "$$" ] || [ "$4" = "$$" ]; then kill -KILL "$p" 2>/dev/null && left=1; fi
    done
    [ "$left" = 0 ] && break
  done
fi
rm -f "$slot" 2>/dev/null
exit $rc`;

/**
 * `kill_session PG`: kills process group PG at once (atomic against forks), then scans /proc with
 * builtins for members that moved to another group of the same session (after the command name,
 * which may hold spaces: state, ppid, pgrp, session). A function's `set --` leaves the caller's
 * positional parameters alone.
 */
const KILL_SESSION = `kill_session() {
  ks_pg=$1
  kill -KILL -"$ks_pg" 2>/dev/null
  ks_round=0
  while [ "$ks_round" -lt 5 ]; do
    ks_round=$((ks_round + 1)); ks_left=0
    for ks_f in /proc/[0-9]*/stat; do
      read -r ks_l 2>/dev/null <"$ks_f" || continue
      ks_l=\${ks_l##*) }
      set -- $ks_l
      [ "$1" = Z ] && continue
      if [ "$3" = "$ks_pg" ] || [ "$4" = "$ks_pg" ]; then
        ks_p=\${ks_f#/proc/}; ks_p=\${ks_p%/stat}
        kill -KILL "$ks_p" 2>/dev/null && ks_left=1
      fi
    done
    [ "$ks_left" = 0 ] && break
  done
}`;

/**
 * Kills the tree recorded in slot file `$0` when its nonce equals `$1` (an empty `$1` only reads
 * counters). Runs as the same user as the command, so whatever the slot file says, it can signal
 * nothing the command could not have signalled itself. The group kill is atomic against forks;
 * the /proc scan then catches members that moved to another group of the same session.
 * `$2` is what to do with the slot: empty (a kill while the command runs: keep it), `reap` (the
 * command has ended: kill what it left in its session, then remove the slot file) or `forget`
 * (ended with `keepProcesses`: remove the slot file only, so no later host takes the kept
 * processes for an orphaned command).
 * Prints `killed=`, `pids_max=` (cgroup pids.events) and `oom_kill=` (memory OOM kill counter).
 */
export const CONTROL_SCRIPT = `
${KILL_SESSION}
slot=$0 want=$1 mode=$2
killed=none
if [ -n "$want" ] && read -r pg nonce 2>/dev/null <"$slot" && [ "$nonce" = "$want" ]; then
  case "$pg" in ''|*[!0-9]*) pg=0 ;; esac
  if [ "$mode" != forget ] && [ "$pg" -gt 1 ]; then
    kill_session "$pg"
    killed=$pg
  fi
  [ -n "$mode" ] && rm -f "$slot" 2>/dev/null
fi
echo "killed=$killed"
for f in /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events; do
  if read -r k n 2>/dev/null <"$f"; then echo "pids_max=$n"; break; fi
done
for f in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do
  [ -r "$f" ] || continue
  while read -r k v; do [ "$k" = oom_kill ] && echo "oom_kill=$v"; done <"$f"
  break
done
`;

/** The distinct `uid:gid` owners of the slot files in the control dir, one a line. */
export const SLOT_OWNERS_SCRIPT = `for f in "$0"/.berth-exec.*; do [ -f "$f" ] && stat -c '%u:%g' "$f"; done 2>/dev/null | sort -u`;

/**
 * After a restart: every slot file still in `$0` (the control dir) belongs to a command of a host
 * that died (a command that ends removes its own, see CONTROL_SCRIPT). For each file this user owns
 * (`-O`: a file another user wrote is not trusted), kills the recorded session as CONTROL_SCRIPT
 * does, without a nonce (the dead host's is gone), and removes the file. Run once per owner, as
 * that owner, so it can signal nothing the command could not. Prints `orphans=<sessions killed>`.
 */
export const ORPHAN_SCRIPT = `
${KILL_SESSION}
n=0
for s in "$0"/.berth-exec.*; do
  [ -f "$s" ] && [ -O "$s" ] || continue
  if read -r pg nonce 2>/dev/null <"$s"; then
    case "$pg" in ''|*[!0-9]*) pg=0 ;; esac
    if [ "$pg" -gt 1 ]; then
      kill_session "$pg"
      n=$((n + 1))
    fi
  fi
  rm -f "$s" 2>/dev/null
done
echo "orphans=$n"
`;

export interface ControlReport {
  /** The process group that was killed, if any. */
  killed: number | undefined;
  /** Cumulative count of forks refused by the pids limit. */
  pidsMax: number | undefined;
  /** Cumulative count of OOM kills in the container's memory cgroup. */
  oomKill: number | undefined;
}

export function parseControlReport(text: string): ControlReport {
  const values = new Map<string, string>();
  for (const line of text.split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) values.set(line.slice(0, eq).trim(), line.slice(eq + 1).trim());
  }
  const num = (key: string): number | undefined => {
    const v = values.get(key);
    if (v === undefined || v === '' || !/^\d+$/.test(v)) return undefined;
    return Number(v);
  };
  return { killed: num('killed'), pidsMax: num('pids_max'), oomKill: num('oom_kill') };
}

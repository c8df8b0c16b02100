/**
 * The container's process list, read and killed with shell builtins only, so that it keeps working
 * while a fork bomb holds every pid but a few. Every kill goes by the process list, never by
 * session or process group: a process that calls `setsid()` leaves both, but it cannot leave the
 * list, change its start time or become a child of anything but init once its parent is gone.
 *
 * What is never killed (the anchors): PID 1 (docker-init), the idle loop (the child of PID 1 that
 * started first; nothing started later can start before it) and what runs under it, the kept
 * processes (`keepProcesses`, recorded with their start times in {@link KEPT_FILE}, which only
 * root can write) and what runs under them, and the shell doing the killing. What runs under an
 * exec root (a process whose parent is outside the container: the engine started it) belongs to a
 * live exec; everything else is a leftover ("orphan": its ancestry reaches init directly).
 */
import { CONTROL_DIR } from './container-options';

/** Where root records the processes kept on purpose, one `pid start` a line. Readable by all, writable by root only. */
export const KEPT_FILE = `${CONTROL_DIR}/kept`;

/**
 * Marks the first line of every command wrapper's script, and so the first line of its
 * /proc/PID/cmdline as `read` gives it (the NULs dropped): an exec root with it is a berth command.
 */
export const WRAPPER_MARK = '# berth-exec';

/**
 * Functions:
 * - `pst PID`: `ps_state ps_ppid ps_start ps_comm` from /proc/PID/stat (after the command name, which
 *   may hold spaces and parentheses: state, ppid, ..., field 22 the start time in clock ticks).
 * - `pl_scan`: `pl_all` (" pid:ppid:start:state" of every process but init), `pl_roots` (" pid:start"
 *   of every exec root), `pl_idle` (the idle loop).
 * - `pl_anchors`: `pl_anchor`, the anchors above plus the `pid:start` pairs in `$pl_spare`.
 * - `pl_wrappers`: `pl_other`, the start of the oldest exec root other than this shell that is a
 *   berth command; a leftover started after it may be that command's, so sweeps leave it.
 * - `pl_where PID`: 0 under an anchor (or gone), 2 under an exec root, 1 a leftover, with `pl_top` and
 *   `pl_top_start` its ancestor right below init (a leftover's whole subtree shares its fate).
 * - `pl_is_target PID`: by `$pl_mode`: `tree` (PID is `$pl_tree` or under it), `sweep` (a leftover
 *   started before `$pl_other`), `earlier` (anything not anchored, exec roots included).
 * - `pl_kill`: stops every target of this user until a round finds none running (a stopped process
 *   cannot fork; from the third round on, with every process of this user stopped at once and the
 *   non-targets continued at the end), then kills them all; `pl_killed` counts the processes killed, `pl_found` is 1
 *   when there was any target at all. Processes of other users cannot be signalled and are skipped.
 */
export const PROC_LIB = `
pst() {
  read -r ps_l 2>/dev/null </proc/$1/stat || return 1
  ps_comm=\${ps_l#*(}; ps_comm=\${ps_comm%) *}
  ps_l=\${ps_l##*) }
  set -- $ps_l
  [ $# -ge 20 ] || return 1
  ps_state=$1 ps_ppid=$2
  shift 19
  ps_start=$1
}
pl_scan() {
  pl_all= pl_roots= pl_idle= pl_is=
  for pl_f in /proc/[0-9]*/stat; do
    pl_p=\${pl_f#/proc/}; pl_p=\${pl_p%/stat}
    [ "$pl_p" = 1 ] && continue
    pst "$pl_p" || continue
    pl_all="$pl_all $pl_p:$ps_ppid:$ps_start:$ps_state"
    [ "$ps_ppid" = 0 ] && pl_roots="$pl_roots $pl_p:$ps_start"
    if [ "$ps_ppid" = 1 ]; then
      if [ -z "$pl_idle" ] || [ "$ps_start" -lt "$pl_is" ] || { [ "$ps_start" = "$pl_is" ] && [ "$pl_p" -lt "$pl_idle" ]; }; then pl_idle=$pl_p pl_is=$ps_start; fi
    fi
  done
}
pl_get() {
  case "$pl_all " in *" $1:"*) ;; *) return 1 ;; esac
  g_r=\${pl_all#* $1:}; g_ppid=\${g_r%%:*}; g_r=\${g_r#*:}; g_start=\${g_r%%:*}
}
pl_anchors() {
  pl_anchor=" $pl_idle $$ "
  if [ -r ${KEPT_FILE} ]; then
    while read -r a_p a_s; do
      pl_get "$a_p" && [ "$g_start" = "$a_s" ] && pl_anchor="$pl_anchor$a_p "
    done <${KEPT_FILE}
  fi
  for a_e in $pl_spare; do
    pl_get "\${a_e%%:*}" && [ "$g_start" = "\${a_e#*:}" ] && pl_anchor="$pl_anchor\${a_e%%:*} "
  done
}
pl_wrappers() {
  pl_other=
  for o_e in $pl_roots; do
    o_p=\${o_e%%:*}
    [ "$o_p" = $$ ] && continue
    read -r o_c 2>/dev/null </proc/$o_p/cmdline || continue
    case $o_c in *'${WRAPPER_MARK}'*) ;; *) continue ;; esac
    o_s=\${o_e#*:}
    if [ -z "$pl_other" ] || [ "$o_s" -lt "$pl_other" ]; then pl_other=$o_s; fi
  done
}
pl_where() {
  w_x=$1 w_n=0
  while [ $w_n -lt 4096 ]; do
    case "$pl_anchor" in *" $w_x "*) return 0 ;; esac
    pl_get "$w_x" || return 0
    [ "$g_ppid" = 0 ] && return 2
    if [ "$g_ppid" = 1 ]; then pl_top=$w_x pl_top_start=$g_start; return 1; fi
    w_x=$g_ppid w_n=$((w_n + 1))
  done
  return 0
}
pl_is_target() {
  case $pl_mode in
    tree)
      [ -n "$pl_tree" ] || return 1
      t_x=$1 t_n=0
      while [ $t_n -lt 4096 ]; do
        [ "$t_x" = "$pl_tree" ] && return 0
        pl_get "$t_x" || return 1
        t_x=$g_ppid t_n=$((t_n + 1))
        case $t_x in 0|1) return 1 ;; esac
      done
      return 1 ;;
    sweep)
      pl_where "$1"
      [ $? = 1 ] || return 1
      [ -z "$pl_other" ] || [ "$pl_top_start" -lt "$pl_other" ] ;;
    earlier)
      pl_where "$1"
      [ $? != 0 ] ;;
    *) return 1 ;;
  esac
}
pl_prepare() {
  pl_scan; pl_anchors; pl_wrappers
  if [ "$pl_mode" = tree ]; then
    pl_tree=
    pl_get "\${pl_target%%:*}" && [ "$g_start" = "\${pl_target#*:}" ] && pl_tree=\${pl_target%%:*}
  fi
}
pl_kill() {
  pl_killed=0 pl_found=0 pl_stopped= k_round=0 pl_held= pl_broad=
  while [ $k_round -lt 50 ]; do
    k_round=$((k_round + 1)); k_new=0
    pl_prepare
    for k_e in $pl_all; do
      k_p=\${k_e%%:*}; k_s=\${k_e##*:}
      [ "$k_p" = $$ ] && continue
      case $k_s in Z|X|x) continue ;; esac
      pl_is_target "$k_p" || continue
      pl_found=1
      case $k_s in T|t) continue ;; esac
      # Seen running: another round, even when it is gone by now (its children may not be).
      k_new=1
      kill -STOP "$k_p" 2>/dev/null && pl_stopped="$pl_stopped $k_p"
    done
    [ $k_new = 0 ] && break
    # Still new targets running after two rounds: a fork bomb's members fork and exit faster than
    # a round reads the list (under load every round found a new generation, gone before its
    # STOP). One kill(-1) stops every process this user may signal in one pass of the kernel, and
    # none can fork past it; the rounds then see a still list. What was stopped that is no
    # target is continued below, except what was stopped already (\`pl_held\`).
    if [ $k_round = 2 ] && [ -z "$pl_broad" ]; then
      pl_held=" "
      for k_e in $pl_all; do case \${k_e##*:} in T|t) pl_held="$pl_held\${k_e%%:*} " ;; esac; done
      kill -STOP -1 2>/dev/null && pl_broad=1
    fi
  done
  if [ $pl_found = 1 ]; then
    pl_prepare
    for k_e in $pl_all; do
      k_p=\${k_e%%:*}; k_s=\${k_e##*:}
      [ "$k_p" = $$ ] && continue
      case $k_s in Z|X|x) continue ;; esac
      pl_is_target "$k_p" && kill -KILL "$k_p" 2>/dev/null && pl_killed=$((pl_killed + 1))
    done
  fi
  # A process stopped above that is no target any more (kept meanwhile) must not stay stopped.
  for k_p in $pl_stopped; do kill -CONT "$k_p" 2>/dev/null; done
  [ -n "$pl_broad" ] || return 0
  pl_scan
  for k_e in $pl_all; do
    k_p=\${k_e%%:*}
    case \${k_e##*:} in T|t) ;; *) continue ;; esac
    case "$pl_held" in *" $k_p "*) continue ;; esac
    kill -CONT "$k_p" 2>/dev/null
  done
}
`;

/** Prints the cgroup counters: `pids_max=` (forks refused by the pids limit) and `oom_kill=`. */
export const COUNTERS = `
for f in /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events; do
  if read -r k n 2>/dev/null <"$f"; then echo "pids_max=$n"; break; fi
done
for f in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do
  [ -r "$f" ] || continue
  while read -r k v; do [ "$k" = oom_kill ] && echo "oom_kill=$v"; done <"$f"
  break
done
`;

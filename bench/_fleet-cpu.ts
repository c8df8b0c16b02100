/** CPU time of processes, from /proc (Linux): what each worker and the PostgreSQL server used. */
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/PID/stat times (USER_HZ, 100 on every Linux this runs on). */
const HZ = 100;

/** utime + stime (+ waited-for children's, `withChildren`) of one process, in seconds; 0 once it is gone. */
export function cpuSeconds(pid: number, withChildren = false): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start at field 3.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(f[11]) + Number(f[12]) + (withChildren ? Number(f[13]) + Number(f[14]) : 0);
    return ticks / HZ;
  } catch {
    return 0;
  }
}

function parentOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return -1;
  }
}

/** The postmaster listening on `port` (its command line names the port), if it runs on this machine. */
export function postmasterPid(port: number): number | undefined {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmd = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      if (cmd[0]?.endsWith('postgres') && cmd.some((a, i) => a === `-p ${port}` || (a === '-p' && cmd[i + 1] === String(port)))) return Number(name);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

/**
 * CPU seconds of a PostgreSQL server: the postmaster, the backends it already reaped (its
 * children's times) and every live child (backends, WAL writer, checkpointer).
 */
export function serverCpuSeconds(postmaster: number): number {
  let total = cpuSeconds(postmaster, true);
  for (const name of readdirSync('/proc')) {
    if (/^\d+$/.test(name) && parentOf(Number(name)) === postmaster) total += cpuSeconds(Number(name));
  }
  return total;
}

// No imports: container-options.ts imports this, and everything else here imports container-options.

/** CONTROL_DIR of container-options.ts (which imports this file). */
const CONTROL_DIR_PATH = '/dev/berth';

/**
 * Where the host writes the lease's deadline inside the sandbox: seconds of the machine's uptime
 * (`/proc/uptime`, which no clock change moves and which host and container read alike). In the
 * root-owned control tmpfs: no command can forge a renewal.
 */
export const LEASE_UNTIL_FILE = `${CONTROL_DIR_PATH}/lease-until`;

/**
 * The sandbox's PID 1 child (docker-init's only child): it idles, and every few seconds checks
 * that the lease was renewed. Armed from the start with the lease TTL (a host that dies before its
 * first renewal leaves a sandbox that stops too); each renewal moves the deadline. Once the
 * deadline passed, it exits: docker-init exits with it, the container stops, and the kernel kills
 * every process in it, `setsid` daemons and kept processes included. So a sandbox whose host died,
 * was frozen (SIGSTOP) or was cut off goes quiet within one TTL, with nobody reaching its engine.
 * `$1` is the TTL in seconds, `$2` the check interval, `$3` this script again (see below).
 *
 * Its loop never forks: a command's fork bomb holds every pid the limit allows, and a shell whose
 * fork fails exits (ash and dash raise an error, status 2), which stopped the whole sandbox (seen
 * on CI: the fork-bomb test's container exited 2 mid-bomb). So it waits with `read -t` on a FIFO
 * it holds open for both ends (no writer ever comes, no end of file either), made at start before
 * any command runs. A shell without `read -t` (dash) hands over to bash when the image has it; with
 * neither, or no FIFO, it falls back to `sleep`, which a fork bomb can still break.
 */
export const WATCHDOG_SCRIPT = [
  'ttl=$1 every=$2',
  'read -t 0 _ </dev/null 2>/dev/null',
  'if [ $? = 2 ] && [ -n "$3" ] && [ -x /bin/bash ]; then exec /bin/bash -c "$3" "$0" "$1" "$2"; fi',
  'nap() { sleep "$every" 2>/dev/null || sleep 1 2>/dev/null; }',
  `f=${CONTROL_DIR_PATH}/nap.$$`,
  'read -t 0 _ </dev/null 2>/dev/null',
  'if [ $? != 2 ] && mkfifo -m 600 "$f" 2>/dev/null; then exec 3<>"$f"; rm -f "$f" 2>/dev/null; nap() { read -t "$every" _ <&3; }; fi',
  'read up _ < /proc/uptime; until=$(( ${up%.*} + ttl ))',
  'while :; do',
  '  nap',
  `  if [ -r ${LEASE_UNTIL_FILE} ]; then read next < ${LEASE_UNTIL_FILE} 2>/dev/null; case "$next" in ''|*[!0-9]*) ;; *) until=$next ;; esac; fi`,
  '  read up _ < /proc/uptime',
  '  if [ "${up%.*}" -gt "$until" ]; then echo "berth: the lease was not renewed for ${ttl}s: the sandbox stops its commands" >&2; exit 0; fi',
  'done',
].join('\n');

export const WATCHDOG_NAME = 'berth-watchdog';

/** The idle command of a sandbox whose lease lasts `ttlS` without a renewal. */
export function watchdogCommand(ttlS: number): string[] {
  const every = Math.max(1, Math.min(5, Math.floor(ttlS / 4)));
  return ['/bin/sh', '-c', WATCHDOG_SCRIPT, WATCHDOG_NAME, String(ttlS), String(every), WATCHDOG_SCRIPT];
}

/** Renews the in-sandbox deadline to `$1` seconds from now; run as root (the control tmpfs is root's). */
export const RENEW_SCRIPT = `read up _ < /proc/uptime; echo $(( \${up%.*} + $1 )) > ${LEASE_UNTIL_FILE}`;

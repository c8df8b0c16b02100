import { posix } from 'node:path';

/** `sha256:` and 64 lowercase hex digits: a Docker image id or content digest. */
export const DIGEST = /^sha256:[0-9a-f]{64}$/;

/**
 * An image reference such as `berth/tiny:latest` or `host:5000/team/app:1.2`; an `@sha256:` suffix
 * is refused because the digest has its own field, which `env lock` fills.
 */
export const IMAGE_REF = /^(?:[A-Za-z0-9.-]+(?::\d+)?\/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$/;

/** Environment-variable style secret names, so a secret can be exposed as `$NAME`. */
export const SECRET_NAME = /^[A-Z][A-Z0-9_]*$/;

/** A numeric `uid:gid`, because the image's passwd file may not know the host's names. */
export const OWNER = /^\d+:\d+$/;

/** An owner whose uid is 0: commands would run as root in the sandbox. */
export const ROOT_OWNER = /^0+:\d+$/;

const SYSTEM_AREAS = ['/proc', '/sys', '/dev', '/etc'];

/** The system directory a workspace path is (or lies under), when it is one: a workspace there overlays what the kernel or image needs. */
export function systemArea(path: string): string | undefined {
  return SYSTEM_AREAS.find((a) => path === a || path.startsWith(`${a}/`));
}

const HOST_LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
const HOST = new RegExp(`^(?:\\*\\.)?${HOST_LABEL}(?:\\.${HOST_LABEL})*$`);

/**
 * Why a workspace path is unacceptable, or undefined when it is fine. `..` is refused outright
 * rather than normalised away, so the path in the manifest is the path in the sandbox.
 */
export function workspacePathProblem(path: string): string | undefined {
  if (!path.startsWith('/')) return 'an absolute path (starting with /)';
  if (path.split('/').includes('..')) return 'a path without ".." segments';
  if (path === '/') return 'a directory below / (not / itself)';
  if (posix.normalize(path) !== path || path.endsWith('/')) return `a normalised path (${posix.normalize(path).replace(/(.)\/$/, '$1')})`;
  return undefined;
}

/**
 * Why an egress allow pattern is unacceptable, or undefined. A pattern is `host:port` where the
 * host is exact or `*.suffix` (any name ending in .suffix) and the port is always explicit:
 * "any port" would let a sandbox reach every service of an allowed host.
 */
export function allowPatternProblem(pattern: string): string | undefined {
  const m = /^(.*):([^:]*)$/.exec(pattern);
  if (!m) return 'host:port with an explicit port';
  const [, host = '', port = ''] = m;
  if (!HOST.test(host)) return 'an exact lowercase host or *.suffix before the port';
  if (!/^\d+$/.test(port) || Number(port) < 1 || Number(port) > 65535) return 'a port from 1 to 65535 after the host';
  return undefined;
}

import { BerthError } from '../errors';
import { hostSecretSource, type SecretSource } from '../secrets';
import type { SandboxGatewaySpec } from '../sandbox';

/**
 * The provider key, read on the host for one request and never kept: a changed variable or file
 * takes effect at the next request. `gateway_key_unavailable` names the source, never a value.
 */
export async function providerKey(key: SandboxGatewaySpec['key'], source: SecretSource = hostSecretSource): Promise<string> {
  if ('env' in key) {
    const v = source.env(key.env);
    if (!v) throw new BerthError('gateway_key_unavailable', `model gateway: host environment variable ${key.env} (gateway.provider.key) is not set`, { details: { env: key.env } });
    return v;
  }
  let v: string;
  try {
    v = (await source.file(key.file)).replace(/\r?\n$/, '');
  } catch (err) {
    throw new BerthError('gateway_key_unavailable', `model gateway: cannot read host file ${key.file} (gateway.provider.key): ${(err as NodeJS.ErrnoException).code ?? 'error'}`, { details: { file: key.file } });
  }
  if (!v) throw new BerthError('gateway_key_unavailable', `model gateway: host file ${key.file} (gateway.provider.key) is empty`, { details: { file: key.file } });
  return v;
}

import { BerthError } from '../../errors';
import type { ModelConfig } from './model-config';

/**
 * The API key, read from the environment variable the config names at the moment it is needed.
 * The error names the variable, never a value.
 */
export function readApiKey(cfg: Pick<ModelConfig, 'apiKeyEnv'>, env: NodeJS.ProcessEnv = process.env): string {
  const key = env[cfg.apiKeyEnv];
  if (!key) throw new BerthError('api_key_missing', `the model API key is read from $${cfg.apiKeyEnv}, which is not set in this process`, { details: { apiKeyEnv: cfg.apiKeyEnv } });
  return key;
}

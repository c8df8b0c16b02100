import type * as OpenAiModule from 'openai';
import { loadModule } from '../../support/load-module';

let loaded: typeof OpenAiModule | undefined;

/**
 * The `openai` client module, loaded by the first model request: a process that runs no agent
 * (every `berth run`) does not pay its ~45 ms of loading at start.
 */
export async function openAiModule(): Promise<typeof OpenAiModule> {
  return (loaded ??= await loadModule<typeof OpenAiModule>('openai'));
}

/** The module if a request loaded it; before that, no error can be one of its classes. */
export function openAiModuleIfLoaded(): typeof OpenAiModule | undefined {
  return loaded;
}

import { BerthError } from '../host/errors';
import type { ImageDefinition } from './definition';
import { codex } from './codex/definition';
import { dev } from './dev/definition';
import { tiny } from './tiny/definition';

const all: readonly ImageDefinition[] = [tiny, dev, codex];

/** Names of the images `npm run images` can build, in build order. */
export const imageDefinitions: readonly string[] = all.map((d) => d.name);

export function getDefinition(name: string): ImageDefinition {
  const def = all.find((d) => d.name === name);
  if (!def) throw new BerthError('image_unknown', `no image definition named "${name}" (known: ${imageDefinitions.join(', ')})`);
  return def;
}

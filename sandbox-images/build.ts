/**
 * `npm run images -- [--force] [--json] [names...]`: builds (or reuses) the named sandbox
 * images, all of them by default. Progress goes to stderr so that --json stdout stays parseable.
 */
import { isBerthError } from '../host/errors';
import { buildImage, imageDefinitions, type BuiltImage } from './index';

async function main(argv: string[]): Promise<number> {
  const json = argv.includes('--json');
  const force = argv.includes('--force');
  const names = argv.filter((a) => !a.startsWith('--'));
  const controller = new AbortController();
  process.once('SIGINT', () => controller.abort());
  process.once('SIGTERM', () => controller.abort());
  const results: BuiltImage[] = [];
  for (const name of names.length > 0 ? names : imageDefinitions) {
    const built = await buildImage(name, {
      signal: controller.signal,
      force,
      onProgress: (e) => process.stderr.write(`[${e.name}] ${e.step}: ${e.message}\n`),
    });
    results.push(built);
    if (!json) console.log(`${built.name} ${built.imageId} ${built.reused ? 'reused' : 'built'} ${built.durationMs}ms ${built.tags.join(' ')}`);
  }
  if (json) console.log(JSON.stringify(results, null, 2));
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (isBerthError(err)) console.error(JSON.stringify(err.toJSON(), null, 2));
    else console.error(err);
    process.exit(1);
  },
);

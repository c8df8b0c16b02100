/**
 * `import()` of a module outside the bundle (a package in node_modules, an extension file), by
 * whoever runs this code. The CLI's bundle is a script compiled from V8's code cache
 * (host/cli/code-cache.mjs), and a script compiled from a cache keeps no dynamic-import callback:
 * its own `import()` failed with "A dynamic import callback was not specified" once the cache hit
 * (an extension, `openai`, `pg`). The CLI's loader, an ordinary module, hands its own `import`
 * here; everywhere else (the library, tsx) the plain `import()` serves.
 */
export function loadModule<T = Record<string, unknown>>(specifier: string): Promise<T> {
  const given = (globalThis as Record<symbol, unknown>)[Symbol.for('berth.import')] as ((s: string) => Promise<unknown>) | undefined;
  return (given ? given(specifier) : import(specifier)) as Promise<T>;
}

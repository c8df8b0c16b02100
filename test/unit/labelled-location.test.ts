import { describe, expect, it } from 'vitest';
import { labelledLocation, SERVER_STORE_LOCATION } from '../../host/sandbox/labels';

describe('the store location a sandbox and a snapshot image are labelled with', () => {
  it('makes a SQLite file\'s path absolute and leaves a server store\'s word and a URL as they are', () => {
    const resolve = (p: string) => `/cwd/${p}`;
    expect(labelledLocation('berth.db', resolve)).toBe('/cwd/berth.db');
    expect(labelledLocation(SERVER_STORE_LOCATION, resolve)).toBe('postgresql');
    expect(labelledLocation('sqlite://x', resolve)).toBe('sqlite://x');
    expect(labelledLocation(undefined, resolve)).toBeUndefined();
  });
});

import { describe, expect, it } from 'vitest';
import { environmentName } from '../../host/cli/commands/gc';

describe("berth gc --orphans' name for an environment's image", () => {
  it("names it as the operator knows it, not by the registry transport's name, which may be listed first", () => {
    // Seen in a full suite: a registry test had pushed berth/tiny, and gc said "on 127.0.0.1:34427/berth-base:7312...".
    const names = ['127.0.0.1:34427/berth-base:73127a17baee', 'berth-snapshot:snap_1', 'berth/tiny:latest', 'berth-snapshot/store_a:snap_1'];
    expect(environmentName(names, 'sha256:73127a17baee1956')).toBe('berth/tiny:latest');
  });

  it("falls back to the transport's name, then to the image's short id", () => {
    expect(environmentName(['berth-snapshot:snap_1', '127.0.0.1:5000/berth-base:abc'], 'sha256:73127a17baee1956')).toBe('127.0.0.1:5000/berth-base:abc');
    expect(environmentName(['berth-snapshot:snap_1', '<none>:<none>'], 'sha256:73127a17baee1956')).toBe('73127a17baee');
  });
});

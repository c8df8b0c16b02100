/**
 * What grew between two heap snapshots (v8.writeHeapSnapshot): objects counted by type and
 * constructor name, the largest growth in count first.
 *   node --import tsx bench/_soak-heapdiff.ts A.heapsnapshot B.heapsnapshot [TOP=40]
 */
import { readFileSync } from 'node:fs';

type Snap = { snapshot: { meta: { node_fields: string[]; node_types: [string[]] } }; nodes: number[]; strings: string[] };
function counts(file: string): Map<string, { n: number; bytes: number }> {
  const s = JSON.parse(readFileSync(file, 'utf8')) as Snap;
  const f = s.snapshot.meta.node_fields;
  const width = f.length;
  const [ti, ni, si] = [f.indexOf('type'), f.indexOf('name'), f.indexOf('self_size')];
  const types = s.snapshot.meta.node_types[0];
  const out = new Map<string, { n: number; bytes: number }>();
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + ti]!]!;
    const name = type === 'object' || type === 'closure' || type === 'native' ? s.strings[s.nodes[i + ni]!]! : '';
    const key = `${type}:${name.slice(0, 80)}`;
    const c = out.get(key) ?? { n: 0, bytes: 0 };
    c.n++;
    c.bytes += s.nodes[i + si]!;
    out.set(key, c);
  }
  return out;
}
const [a, b, top] = process.argv.slice(2);
const before = counts(a!);
const after = counts(b!);
const rows = [...after].map(([k, v]) => ({ k, dn: v.n - (before.get(k)?.n ?? 0), db: v.bytes - (before.get(k)?.bytes ?? 0) })).filter((r) => r.dn > 0);
rows.sort((x, y) => y.db - x.db);
for (const r of rows.slice(0, Number(top ?? 40))) console.log(`${String(r.dn).padStart(8)} objects ${String(r.db).padStart(10)} bytes  ${r.k}`);

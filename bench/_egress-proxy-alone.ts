/**
 * The egress proxy alone in a process (allowing 127.0.0.1:TPORT), driven by bench/_egress-proxy-cpu.ts
 * over IPC: sends its port, answers `reset` / `cpu` (its own CPU ms since the reset) / `exit`.
 */
import { EgressProxy } from '../host/egress';
const tport = Number(process.argv[2]);
const allow = [`127.0.0.1:${tport}`];
const proxy = new EgressProxy({ allow, overrides: allow, runId: null, leaseId: null, record: () => {} });
const port = (await proxy.listen('127.0.0.1')).port;
let u = process.cpuUsage();
process.on('message', (m) => {
  if (m === 'reset') { u = process.cpuUsage(); process.send!('ok'); }
  if (m === 'cpu') { const d = process.cpuUsage(u); process.send!(`${(d.user + d.system) / 1000}`); }
  if (m === 'exit') process.exit(0);
});
process.send!(String(port));

// The test kubelet of the harness (build/test/harness/kubelet.js) as a process of its own, for the
// benchmark: the shells it runs and the output it floods must not share an event loop with the load
// generator or the benchmark's own bookkeeping.
//
//   node scripts/bench-kubelet.mjs <control plane state dir> <node name>     (forked, with an IPC channel)
//
// It registers the Node with the control plane's apiserver (which then reaches it at 127.0.0.1:<port>),
// sends `{ ready: port }` to its parent, and stays up until the parent says `stop`, disconnects or sends
// SIGTERM; then it deletes the Node and exits.
import { attachControlPlane } from '../build/test/harness/control-plane.js';
import { startKubelet } from '../build/test/harness/kubelet.js';

const [dir, nodeName] = process.argv.slice(2);
if (!dir || !nodeName || !process.send) {
  console.error('usage (forked with IPC): node scripts/bench-kubelet.mjs <control plane dir> <node name>');
  process.exit(2);
}
// Attached, never stopped here: the control plane belongs to whoever started it.
const cp = attachControlPlane(dir);
const kubelet = await startKubelet(cp, nodeName);
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await kubelet.stop().catch(() => undefined);
  process.exit(0);
};
process.on('message', (m) => m === 'stop' && void stop());
process.on('disconnect', () => void stop());
process.on('SIGTERM', () => void stop());
process.send({ ready: kubelet.port });

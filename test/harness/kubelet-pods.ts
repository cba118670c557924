// The test kubelet's pod lifecycle (opt-in: startKubelet(cp, node, { runPods: {…} })): what a real
// kubelet reports for the pods bound to its node, so that clients that wait for a container to run
// (kubectl debug, the service's debug and node-shell routes) see it run.
//
// Every POLL_MS it lists the pods bound to the node and writes their status through the real
// apiserver (pods/status): each container and ephemeral container `running`, except those whose
// image the test named unpullable, which wait with `ErrImagePull` as a kubelet reports it; phase
// Running once every regular container runs. A pod being deleted is removed at once (the kubelet's
// final DELETE with grace period 0), so deletions the service makes complete as on a real node.
// Nothing runs: exec and attach are served by kubelet-streams.ts whatever the status says.
import { kubeRequest, type ControlPlane } from './control-plane.js';

const POLL_MS = 150;

export interface RunPodsOptions {
  /** Images that cannot be pulled: their containers wait with reason ErrImagePull. */
  unpullable?: string[];
}

export interface PodRunner {
  /** When the kubelet first reported the container running (ms since the epoch), by `ns/pod/container`. */
  runningAt(namespace: string, pod: string, container: string): number | undefined;
  /** Pods the kubelet removed after their deletion started, by `ns/pod`. */
  readonly removed: string[];
  stop(): Promise<void>;
}

interface Container {
  name: string;
  image: string;
}

interface PodObject {
  metadata: { name: string; namespace: string; uid: string; deletionTimestamp?: string };
  spec: { containers: Container[]; initContainers?: Container[]; ephemeralContainers?: Container[] };
  status?: Record<string, unknown>;
}

export function runPods(cp: ControlPlane, nodeName: string, options: RunPodsOptions): PodRunner {
  const unpullable = new Set(options.unpullable ?? []);
  const written = new Map<string, string>(); // pod uid → signature of the status last written
  const running = new Map<string, number>();
  const started = new Map<string, string>(); // ns/pod/container → startedAt
  const removed: string[] = [];
  let stopped = false;

  const containerStatus = (key: string, c: Container) => {
    if (unpullable.has(c.image)) {
      return {
        name: c.name,
        image: c.image,
        imageID: '',
        ready: false,
        restartCount: 0,
        state: {
          waiting: {
            reason: 'ErrImagePull',
            message: `rpc error: code = NotFound desc = failed to pull and unpack image "${c.image}": not found`,
          },
        },
      };
    }
    const id = `${key}/${c.name}`;
    if (!started.has(id)) started.set(id, new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'));
    return {
      name: c.name,
      image: c.image,
      imageID: `docker-pullable://${c.image}@sha256:${'0'.repeat(64)}`,
      containerID: `containerd://${Buffer.from(id).toString('hex').slice(0, 64)}`,
      ready: true,
      started: true,
      restartCount: 0,
      state: { running: { startedAt: started.get(id) } },
    };
  };

  const sync = async (pod: PodObject) => {
    const { name, namespace, uid } = pod.metadata;
    const key = `${namespace}/${name}`;
    if (pod.metadata.deletionTimestamp) {
      const gone = await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${namespace}/pods/${name}`, {
        kind: 'DeleteOptions',
        apiVersion: 'v1',
        gracePeriodSeconds: 0,
        preconditions: { uid },
      });
      if (gone.status === 200) removed.push(key);
      return;
    }
    const containers = pod.spec.containers.map((c) => containerStatus(key, c));
    const ephemeral = (pod.spec.ephemeralContainers ?? []).map((c) => containerStatus(key, c));
    const allRunning = containers.every((c) => c.state.running);
    const status = {
      phase: allRunning ? 'Running' : 'Pending',
      hostIP: '127.0.0.1',
      podIP: '127.0.0.1',
      startTime: started.get(`${key}/${pod.spec.containers[0]?.name}`) ?? new Date().toISOString(),
      conditions: [
        { type: 'Initialized', status: 'True' },
        { type: 'Ready', status: allRunning ? 'True' : 'False' },
        { type: 'ContainersReady', status: allRunning ? 'True' : 'False' },
        { type: 'PodScheduled', status: 'True' },
      ],
      containerStatuses: containers,
      ...(ephemeral.length > 0 ? { ephemeralContainerStatuses: ephemeral } : {}),
    };
    const signature = JSON.stringify(
      [...containers, ...ephemeral].map((c) => [c.name, c.state.running ? 'running' : 'waiting']),
    );
    if (written.get(uid) === signature) return;
    const patched = await kubeRequest(
      cp,
      'PATCH',
      `/api/v1/namespaces/${namespace}/pods/${name}/status`,
      { status },
      { contentType: 'application/merge-patch+json' },
    );
    if (patched.status !== 200) return; // the pod changed or went meanwhile: the next round sees it
    written.set(uid, signature);
    const now = Date.now();
    for (const c of [...containers, ...ephemeral]) {
      if (c.state.running && !running.has(`${key}/${c.name}`)) running.set(`${key}/${c.name}`, now);
    }
  };

  const loop = (async () => {
    while (!stopped) {
      try {
        const list = await kubeRequest(
          cp,
          'GET',
          `/api/v1/pods?fieldSelector=${encodeURIComponent(`spec.nodeName=${nodeName}`)}`,
        );
        if (list.status === 200) {
          for (const pod of (list.body as { items: PodObject[] }).items) await sync(pod).catch(() => undefined);
        }
      } catch {
        // the apiserver is busy or restarting: try again
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  })();

  return {
    runningAt: (namespace, pod, container) => running.get(`${namespace}/${pod}/${container}`),
    removed,
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

// The test kubelet on a control plane of its own, started with the harness' kubelet flags: the
// apiserver verifies the kubelet's serving certificate against the cluster CA and presents its
// client certificate, which the kubelet demands.
import assert from 'node:assert/strict';
import https from 'node:https';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, startControlPlane, type ControlPlane } from './control-plane.js';
import { startKubelet, type Kubelet } from './kubelet.js';

describe('test kubelet behind a control plane with kubelet TLS in both directions', () => {
  let cp: ControlPlane;
  let kubelet: Kubelet;
  const ns = 'kubelet-test';

  before(async () => {
    cp = await startControlPlane();
    kubelet = await startKubelet(cp, 'node-1');
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    const pod = await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/pods`, {
      metadata: { name: 'p' },
      spec: {
        nodeName: 'node-1',
        automountServiceAccountToken: false,
        containers: [{ name: 'c', image: 'example.invalid/never-pulled' }],
      },
    });
    assert.equal(pod.status, 201, JSON.stringify(pod.body));
  });
  after(async () => {
    await kubelet?.stop();
    await cp?.stop();
  });

  test('the node is registered with its kubelet endpoint on loopback', async () => {
    const node = await kubeRequest(cp, 'GET', '/api/v1/nodes/node-1');
    assert.equal(node.status, 200);
    assert.deepEqual(node.body.status.addresses, [{ type: 'InternalIP', address: '127.0.0.1' }]);
    assert.equal(node.body.status.daemonEndpoints.kubeletEndpoint.Port, kubelet.port);
    assert.equal(kubelet.requiresClientCert, true);
  });

  test('the apiserver proxies pods/log to it over verified TLS', async () => {
    kubelet.write(ns, 'p', 'c', 'hello');
    kubelet.write(ns, 'p', 'c', 'world');
    const log = await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/pods/p/log?tailLines=1`);
    assert.equal(log.status, 200, JSON.stringify(log.body));
    assert.equal(log.body, 'world\n');
    assert.match(kubelet.requests.at(-1)!, /^\/containerLogs\/kubelet-test\/p\/c\?.*tailLines=1/);
  });

  test('a client without the apiserver kubelet-client certificate is refused by the kubelet', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      https
        .get(
          `https://127.0.0.1:${kubelet.port}/containerLogs/${ns}/p/c`,
          { ca: cp.caData, cert: cp.adminCertData, key: cp.adminKeyData, agent: false },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        )
        .on('error', reject);
    });
    assert.equal(status, 401);
  });
});

import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Agent } from 'undici';
import { MetricsEndpointClient, PROMETHEUS_PATHS } from '../../src/clusters/gateway/metrics-endpoint.js';

/**
 * A Prometheus that restarts closes its kept-alive connections; the next request sent on one of them
 * gets ECONNRESET without an answer. That request is sent once more on a new connection, once.
 */
describe('requests to a metrics endpoint over a kept-alive connection the server has closed', () => {
  let server: http.Server;
  let url: string;
  const connections = new Set<Socket>();
  let requests = 0;
  /** What the server does with the next request: answer, or close its connection without a word. */
  let hangUp = (_n: number) => false;
  const agent = new Agent();

  before(async () => {
    server = http.createServer((req, res) => {
      requests++;
      if (hangUp(requests)) {
        req.socket.destroy();
        return;
      }
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ status: 'success', data: { version: '2.42.0' } }));
    });
    server.on('connection', (socket: Socket) => connections.add(socket));
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(async () => {
    await agent.destroy();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const buildInfo = async () => {
    const metrics = new MetricsEndpointClient({ cluster: 'c', url }, agent, 5_000);
    const res = await metrics.get(PROMETHEUS_PATHS.buildInfo, new URLSearchParams());
    const body = JSON.parse((await metrics.read(res, 64 * 1024)).toString('utf8'));
    return { status: res.statusCode, body };
  };

  test('the reset request is sent again on a new connection and answers', async () => {
    assert.equal((await buildInfo()).status, 200);
    assert.equal(connections.size, 1);
    hangUp = (n) => n === 2; // the kept-alive connection is gone when the second request arrives
    const again = await buildInfo();
    assert.equal(again.status, 200);
    assert.equal(again.body.status, 'success');
    assert.equal(requests, 3, 'sent once more');
    assert.equal(connections.size, 2, 'on a new connection');
  });

  test('only once: a server that drops every request gives the caller a 502 naming the endpoint', async () => {
    const before = requests;
    hangUp = () => true;
    await assert.rejects(buildInfo(), {
      status: 502,
      message: "the metrics endpoint of cluster 'c' could not be reached: unreachable: connection reset",
    });
    assert.equal(requests - before, 2, 'the first try and one more');
  });
});

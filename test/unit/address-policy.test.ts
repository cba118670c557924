// Finding 14 of issue 9: cluster servers on link-local or cloud-metadata addresses are refused,
// for literal addresses and for names as they resolve at connect time.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Pool } from 'undici';
import {
  AddressNotAllowedError,
  policyLookup,
  refusedAddress,
  refusedServer,
} from '../../src/clusters/address-policy.js';
import type { ClusterConnection } from '../../src/clusters/cluster-connection.js';
import { ClusterClient } from '../../src/clusters/gateway/cluster-client.js';
import { describeFailure } from '../../src/clusters/gateway/failures.js';

const strict = { allowLinkLocal: false };

describe('address policy', () => {
  test('link-local and metadata addresses are refused; loopback and ordinary addresses are not', () => {
    const refused = [
      '169.254.169.254',
      '169.254.0.1',
      'fe80::1',
      'FE80::abcd:1',
      'febf::1',
      'fd00:ec2::254',
      '::ffff:169.254.169.254',
      '::ffff:a9fe:a9fe',
      '64:ff9b::169.254.169.254',
      '[fe80::1]',
    ];
    for (const address of refused) assert.ok(refusedAddress(address, strict), address);
    const allowed = [
      '127.0.0.1',
      '::1',
      '10.0.0.1',
      '192.168.1.10',
      '169.253.1.1',
      'fec0::1',
      'fd00:ec2::253',
      '2001:db8::1',
    ];
    for (const address of allowed) assert.equal(refusedAddress(address, strict), null, address);
    assert.equal(refusedAddress('169.254.169.254', { allowLinkLocal: true }), null, 'the setting allows them');
  });

  test('a name is checked as it resolves: one resolving to a metadata address fails the connection', async () => {
    const fakeDns = (answer: string, family: number) => (_host: string, options: { all?: boolean }, cb: any) =>
      options.all
        ? cb(null, [
            { address: '127.0.0.1', family: 4 },
            { address: answer, family },
          ])
        : cb(null, answer, family);
    const resolve = (lookup: ReturnType<typeof policyLookup>, all: boolean) =>
      new Promise<unknown>((done) => lookup('cluster.example', { all }, (error, address) => done(error ?? address)));

    for (const all of [false, true]) {
      const refused = await resolve(policyLookup(strict, fakeDns('169.254.169.254', 4)), all);
      assert.ok(refused instanceof AddressNotAllowedError, `all=${all}: ${String(refused)}`);
      assert.equal(describeFailure(refused), 'refused: the server is at a link-local or cloud metadata address');
      const v6 = await resolve(policyLookup(strict, fakeDns('fe80::1', 6)), all);
      assert.ok(v6 instanceof AddressNotAllowedError);
    }
    assert.equal(await resolve(policyLookup(strict, fakeDns('10.1.2.3', 4)), false), '10.1.2.3');
    assert.equal(
      await resolve(policyLookup({ allowLinkLocal: true }, fakeDns('169.254.169.254', 4)), false),
      '169.254.169.254',
    );
  });

  test('a server URL is judged on its literal address; a host name is left to the lookup', () => {
    const strict = { allowLinkLocal: false };
    assert.equal(
      refusedServer(new URL('https://169.254.169.254:6443'), strict),
      '169.254.169.254 is a link-local address (169.254.0.0/16, where cloud metadata lives)',
    );
    assert.match(String(refusedServer(new URL('https://[fe80::1]'), strict)), /^fe80::1 is a link-local address/);
    assert.equal(refusedServer(new URL('https://127.0.0.1:6443'), strict), null);
    assert.equal(refusedServer(new URL('https://metadata.example'), strict), null);
    assert.equal(refusedServer(new URL('https://169.254.169.254'), { allowLinkLocal: true }), null);
  });

  test('a request to a literal metadata address fails before any connection is made', async () => {
    let connections = 0;
    const server = new URL('https://169.254.169.254');
    const dispatcher = new Pool(server.origin, {
      connect: () => {
        connections++;
        throw new Error('must not connect');
      },
    });
    const conn: ClusterConnection = {
      clusterId: 1,
      clusterName: 'meta',
      generation: 1,
      server,
      pathPrefix: '',
      dispatcher,
      tls: {},
      refusedAddress: refusedServer(server, { allowLinkLocal: false }) ?? undefined,
      authHeaders: () => ({}),
      impersonate: false,
    };
    await assert.rejects(new ClusterClient(conn, undefined, 1000).send({ method: 'GET', path: '/version' }), {
      status: 502,
      message: "cluster 'meta' could not be reached: refused: the server is at a link-local or cloud metadata address",
    });
    assert.equal(connections, 0);
  });
});

// The Kubernetes path is decided on the request as the apiserver will read it: the parser follows
// k8s.io/apiserver's RequestInfo, checked here on the apiserver's own test table (requestinfo_test.go)
// and on the paths kubectl and client-go send.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseRequestInfo, queryBoolean, UnplaceableRequestError } from '../../src/k8s/request-info.js';

type Row = [
  method: string,
  url: string,
  verb: string,
  prefix: string,
  group: string,
  version: string,
  namespace: string,
  resource: string,
  subresource: string,
  name: string,
  parts?: string[],
];

function parse(method: string, url: string) {
  const [path, search = ''] = url.split('?');
  return parseRequestInfo(method, path, new URLSearchParams(search));
}

const RESOURCE_REQUESTS: Row[] = [
  // the apiserver's own table
  ['GET', '/api/v1/namespaces', 'list', 'api', '', 'v1', '', 'namespaces', '', '', ['namespaces']],
  [
    'GET',
    '/api/v1/namespaces/other',
    'get',
    'api',
    '',
    'v1',
    'other',
    'namespaces',
    '',
    'other',
    ['namespaces', 'other'],
  ],
  ['GET', '/api/v1/namespaces/other/pods', 'list', 'api', '', 'v1', 'other', 'pods', '', '', ['pods']],
  ['GET', '/api/v1/namespaces/other/pods/foo', 'get', 'api', '', 'v1', 'other', 'pods', '', 'foo', ['pods', 'foo']],
  ['HEAD', '/api/v1/namespaces/other/pods/foo', 'get', 'api', '', 'v1', 'other', 'pods', '', 'foo'],
  ['GET', '/api/v1/pods', 'list', 'api', '', 'v1', '', 'pods', '', '', ['pods']],
  ['HEAD', '/api/v1/pods', 'list', 'api', '', 'v1', '', 'pods', '', ''],
  // As the apiserver reads it (its audit log says so): a Namespace's own requests carry it as their namespace.
  [
    'PATCH',
    '/api/v1/namespaces/new-namespace',
    'patch',
    'api',
    '',
    'v1',
    'new-namespace',
    'namespaces',
    '',
    'new-namespace',
  ],
  ['GET', '/api/v1/proxy/namespaces/other/pods/foo', 'proxy', 'api', '', 'v1', 'other', 'pods', '', 'foo'],
  [
    'GET',
    '/api/v1/proxy/namespaces/other/pods/foo/subpath/not/a/subresource',
    'proxy',
    'api',
    '',
    'v1',
    'other',
    'pods',
    '',
    'foo',
    ['pods', 'foo', 'subpath', 'not', 'a', 'subresource'],
  ],
  ['GET', '/api/v1/watch/pods', 'watch', 'api', '', 'v1', '', 'pods', '', '', ['pods']],
  ['GET', '/api/v1/pods?watch=true', 'watch', 'api', '', 'v1', '', 'pods', '', ''],
  ['GET', '/api/v1/pods?watch=false', 'list', 'api', '', 'v1', '', 'pods', '', ''],
  ['GET', '/api/v1/watch/namespaces/other/pods', 'watch', 'api', '', 'v1', 'other', 'pods', '', '', ['pods']],
  ['GET', '/api/v1/namespaces/other/pods?watch=1', 'watch', 'api', '', 'v1', 'other', 'pods', '', ''],
  ['GET', '/api/v1/namespaces/other/pods?watch=0', 'list', 'api', '', 'v1', 'other', 'pods', '', ''],
  ['GET', '/api/v1/namespaces/other/pods/foo/status', 'get', 'api', '', 'v1', 'other', 'pods', 'status', 'foo'],
  ['GET', '/api/v1/namespaces/other/pods/foo/proxy/subpath', 'get', 'api', '', 'v1', 'other', 'pods', 'proxy', 'foo'],
  ['PUT', '/api/v1/namespaces/other/finalize', 'update', 'api', '', 'v1', 'other', 'namespaces', 'finalize', 'other'],
  ['PUT', '/api/v1/namespaces/other/status', 'update', 'api', '', 'v1', 'other', 'namespaces', 'status', 'other'],
  ['PATCH', '/api/v1/namespaces/other/pods/foo', 'patch', 'api', '', 'v1', 'other', 'pods', '', 'foo'],
  ['DELETE', '/api/v1/namespaces/other/pods/foo', 'delete', 'api', '', 'v1', 'other', 'pods', '', 'foo'],
  ['POST', '/api/v1/namespaces/other/pods', 'create', 'api', '', 'v1', 'other', 'pods', '', ''],
  ['DELETE', '/api/v1/nodes', 'deletecollection', 'api', '', 'v1', '', 'nodes', '', ''],
  ['DELETE', '/api/v1/namespaces', 'deletecollection', 'api', '', 'v1', '', 'namespaces', '', ''],
  ['DELETE', '/api/v1/namespaces/other/pods', 'deletecollection', 'api', '', 'v1', 'other', 'pods', '', ''],
  [
    'DELETE',
    '/apis/extensions/v1/namespaces/other/pods',
    'deletecollection',
    'apis',
    'extensions',
    'v1',
    'other',
    'pods',
    '',
    '',
  ],
  ['POST', '/apis/extensions/v1/namespaces/other/pods', 'create', 'apis', 'extensions', 'v1', 'other', 'pods', '', ''],
  [
    'POST',
    '/apis/extensions/v1beta3/namespaces/other/pods',
    'create',
    'apis',
    'extensions',
    'v1beta3',
    'other',
    'pods',
    '',
    '',
  ],
  // the apiserver's non-API table: these are resource requests
  ['GET', '/api/version/resource', 'list', 'api', '', 'version', '', 'resource', '', ''],
  [
    'GET',
    '/apis/group/version/resource/name/subresource',
    'get',
    'apis',
    'group',
    'version',
    '',
    'resource',
    'subresource',
    'name',
  ],
  ['GET', '/apis/batch/v1/job', 'list', 'apis', 'batch', 'v1', '', 'job', '', ''],
  ['GET', '/apis/batch/v1/job/foo', 'get', 'apis', 'batch', 'v1', '', 'job', '', 'foo'],
  ['GET', '/apis/batch/v1/job/foo/scale', 'get', 'apis', 'batch', 'v1', '', 'job', 'scale', 'foo'],
  // field selectors naming one object (TestFieldSelectorParsing)
  [
    'GET',
    '/apis/group/version/resource?fieldSelector=metadata.name=name1',
    'list',
    'apis',
    'group',
    'version',
    '',
    'resource',
    '',
    'name1',
  ],
  [
    'GET',
    '/apis/group/version/resource?watch=true&fieldSelector=metadata.name=name1',
    'watch',
    'apis',
    'group',
    'version',
    '',
    'resource',
    '',
    'name1',
  ],
  [
    'GET',
    '/apis/group/version/resource?fieldSelector=foo=bar',
    'list',
    'apis',
    'group',
    'version',
    '',
    'resource',
    '',
    '',
  ],
  [
    'GET',
    '/apis/group/version/resource?fieldSelector=metadata.name=name1,foo',
    'list',
    'apis',
    'group',
    'version',
    '',
    'resource',
    '',
    '',
  ],
  [
    'GET',
    '/apis/group/version/resource?fieldSelector=metadata.name=name1,foo&watch=true',
    'watch',
    'apis',
    'group',
    'version',
    '',
    'resource',
    '',
    '',
  ],
  // what kubectl and client-go send
  [
    'GET',
    '/apis/apps/v1/namespaces/shop/deployments/web',
    'get',
    'apis',
    'apps',
    'v1',
    'shop',
    'deployments',
    '',
    'web',
  ],
  ['GET', '/apis/apps/v1/deployments?limit=500', 'list', 'apis', 'apps', 'v1', '', 'deployments', '', ''],
  [
    'GET',
    '/apis/apps/v1/watch/namespaces/shop/deployments/web',
    'watch',
    'apis',
    'apps',
    'v1',
    'shop',
    'deployments',
    '',
    'web',
  ],
  [
    'GET',
    '/apis/apps/v1/namespaces/shop/deployments/web/scale',
    'get',
    'apis',
    'apps',
    'v1',
    'shop',
    'deployments',
    'scale',
    'web',
  ],
  [
    'PATCH',
    '/apis/apps/v1/namespaces/shop/deployments/web/scale',
    'patch',
    'apis',
    'apps',
    'v1',
    'shop',
    'deployments',
    'scale',
    'web',
  ],
  [
    'PUT',
    '/apis/apps/v1/namespaces/shop/deployments/web/status',
    'update',
    'apis',
    'apps',
    'v1',
    'shop',
    'deployments',
    'status',
    'web',
  ],
  ['GET', '/api/v1/namespaces/shop/pods/web-1/log?follow=true', 'get', 'api', '', 'v1', 'shop', 'pods', 'log', 'web-1'],
  [
    'POST',
    '/api/v1/namespaces/shop/pods/web-1/exec?command=ls',
    'create',
    'api',
    '',
    'v1',
    'shop',
    'pods',
    'exec',
    'web-1',
  ],
  [
    'POST',
    '/api/v1/namespaces/shop/pods/web-1/eviction',
    'create',
    'api',
    '',
    'v1',
    'shop',
    'pods',
    'eviction',
    'web-1',
  ],
  ['GET', '/api/v1/nodes/node-1', 'get', 'api', '', 'v1', '', 'nodes', '', 'node-1'],
  ['PATCH', '/api/v1/nodes/node-1/status', 'patch', 'api', '', 'v1', '', 'nodes', 'status', 'node-1'],
  [
    'GET',
    '/apis/rbac.authorization.k8s.io/v1/clusterroles/system:node',
    'get',
    'apis',
    'rbac.authorization.k8s.io',
    'v1',
    '',
    'clusterroles',
    '',
    'system:node',
  ],
  [
    'DELETE',
    '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com',
    'delete',
    'apis',
    'apiextensions.k8s.io',
    'v1',
    '',
    'customresourcedefinitions',
    '',
    'widgets.example.com',
  ],
  [
    'POST',
    '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
    'create',
    'apis',
    'authorization.k8s.io',
    'v1',
    '',
    'selfsubjectaccessreviews',
    '',
    '',
  ],
  ['GET', '/api/v1/namespaces/shop', 'get', 'api', '', 'v1', 'shop', 'namespaces', '', 'shop'],
  ['DELETE', '/api/v1/namespaces/shop', 'delete', 'api', '', 'v1', 'shop', 'namespaces', '', 'shop'],
  ['GET', '/api/v1/namespaces/shop/configmaps?watch=yes', 'watch', 'api', '', 'v1', 'shop', 'configmaps', '', ''],
  ['GET', '/api/v1/namespaces/shop/configmaps?watch=False', 'list', 'api', '', 'v1', 'shop', 'configmaps', '', ''],
  // Booleans as the apiserver's parameter codec reads them: only `0` and `false` (any case) are false.
  ['GET', '/api/v1/namespaces/shop/configmaps?watch=f', 'watch', 'api', '', 'v1', 'shop', 'configmaps', '', ''],
  ['GET', '/api/v1/namespaces/shop/configmaps?watch=F', 'watch', 'api', '', 'v1', 'shop', 'configmaps', '', ''],
  ['GET', '/api/v1/namespaces/shop/configmaps?watch=', 'watch', 'api', '', 'v1', 'shop', 'configmaps', '', ''],
  ['GET', '/api/v1/namespaces/shop/configmaps?watch', 'watch', 'api', '', 'v1', 'shop', 'configmaps', '', ''],
  ['GET', '/api/v1/namespaces/shop/configmaps?watch=fAlSe', 'list', 'api', '', 'v1', 'shop', 'configmaps', '', ''],
  ['GET', '/api/v1/namespaces/shop/configmaps?watch=0&watch=1', 'list', 'api', '', 'v1', 'shop', 'configmaps', '', ''],
  [
    'GET',
    '/api/v1/namespaces/shop/configmaps?watch=no&watch=0',
    'watch',
    'api',
    '',
    'v1',
    'shop',
    'configmaps',
    '',
    '',
  ],
  // Query options the apiserver cannot decode: no name from the selector, and `watch` read by its narrower fallback.
  [
    'GET',
    '/api/v1/namespaces/shop/configmaps?fieldSelector=metadata.name%3Da&limit=ten',
    'list',
    'api',
    '',
    'v1',
    'shop',
    'configmaps',
    '',
    '',
  ],
  ['GET', '/api/v1/namespaces/shop/configmaps?watch=fal%C5%BFe', 'list', 'api', '', 'v1', 'shop', 'configmaps', '', ''],
  [
    'GET',
    '/api/v1/namespaces/shop/configmaps?watch=fal%C5%BFe&labelSelector=a%20in',
    'watch',
    'api',
    '',
    'v1',
    'shop',
    'configmaps',
    '',
    '',
  ],
  ['GET', '/api/v1/namespaces/shop/configmaps/', 'list', 'api', '', 'v1', 'shop', 'configmaps', '', ''],
  ['OPTIONS', '/api/v1/namespaces/shop/configmaps', '', 'api', '', 'v1', 'shop', 'configmaps', '', ''],
];

const NON_RESOURCE_REQUESTS = [
  '/',
  '',
  '/version',
  '/api',
  '/api/v1',
  '/api/version/',
  '/apis',
  '/apis/apps',
  '/apis/apps/v1',
  '/apis/extensions/v1beta1/',
  '/apis/group/version/',
  '/apis/version/resource',
  '/badprefix/version/resource',
  '/not-api/version/resource',
  '/openapi/v2',
  '/openapi/v3/apis/apps/v1',
  '/healthz',
  '/livez/ping',
  '/metrics',
];

describe('parseRequestInfo (k8s.io/apiserver RequestInfo rules)', () => {
  test('the table has at least 40 resource paths', () => {
    assert.ok(RESOURCE_REQUESTS.length + NON_RESOURCE_REQUESTS.length >= 60);
  });

  for (const [
    method,
    url,
    verb,
    prefix,
    group,
    version,
    namespace,
    resource,
    subresource,
    name,
    parts,
  ] of RESOURCE_REQUESTS) {
    test(`${method} ${url}`, () => {
      const info = parse(method, url);
      assert.equal(info.isResourceRequest, true);
      assert.deepEqual(
        {
          verb: info.verb,
          prefix: info.apiPrefix,
          group: info.apiGroup,
          version: info.apiVersion,
          namespace: info.namespace,
          resource: info.resource,
          subresource: info.subresource,
          name: info.name,
        },
        { verb, prefix, group, version, namespace, resource, subresource, name },
      );
      if (parts) assert.deepEqual(info.parts, parts);
    });
  }

  for (const url of NON_RESOURCE_REQUESTS) {
    test(`GET ${url || '(empty)'} is a non-resource request with verb get`, () => {
      const info = parse('GET', url);
      assert.equal(info.isResourceRequest, false);
      assert.equal(info.verb, 'get');
      assert.equal(info.resource, '');
    });
  }

  test('a special verb without anything after it cannot be placed, as the apiserver says', () => {
    for (const url of ['/api/v1/watch', '/apis/apps/v1/watch/', '/api/v1/proxy']) {
      assert.throws(() => parse('GET', url), UnplaceableRequestError, url);
    }
  });

  test('a name from an exact metadata.name match in the field selector, as fields.ParseSelector reads it', () => {
    const nameOf = (selector: string) =>
      parse('GET', `/api/v1/namespaces/a/pods?fieldSelector=${encodeURIComponent(selector)}`).name;
    assert.equal(nameOf('metadata.name==a'), 'a');
    assert.equal(nameOf('status.phase=Running,metadata.name=b'), 'b');
    assert.equal(nameOf('metadata.name!=c'), '');
    assert.equal(nameOf('metadata.name=d,broken'), '', 'a term without an operator: no selector at all');
    assert.equal(nameOf('metadata.name=e\\,f'), 'e,f');
    assert.equal(nameOf('metadata.name=z,metadata.name=y'), 'y', 'terms are sorted before the first match is taken');
    assert.equal(nameOf('metadata.name =g'), '', 'the field is taken as written, space included');
    assert.equal(nameOf('metadata.name= h'), ' h', 'and so is the value');
    assert.equal(nameOf('metadata.name=i=j'), '', 'an unescaped = in a value: no selector');
    assert.equal(nameOf('metadata.name=x\\y'), '', 'an unknown escape: no selector');
    assert.equal(nameOf('metadata.name=..'), '', 'not a valid path segment name');
    assert.equal(nameOf(',,metadata.name=k,'), 'k', 'empty terms are skipped');
  });

  test('queryBoolean reads a query boolean as the apiserver: present and not 0 or false (any case) is true', () => {
    const read = (search: string) => queryBoolean(new URLSearchParams(search), 'follow');
    const truthy = ['true', '1', 't', 'f', 'F', 'yes', 'no', '', '%20false', '00', '1&follow=0'];
    for (const value of truthy) assert.equal(read(`follow=${value}`), true, value);
    assert.equal(read('follow'), true, 'present without a value');
    const falsy = ['0', 'false', 'FALSE', 'fAlSe', '0&follow=1', 'false&follow=true'];
    for (const value of falsy) assert.equal(read(`follow=${value}`), false, value);
    assert.equal(read(''), false, 'absent');
    assert.equal(read('follow=fal%C5%BFe'), false, "Go's EqualFold folds ſ to s");
  });
});

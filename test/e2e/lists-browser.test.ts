/**
 * A console on a second origin in headless Chromium follows a paged list: it fetches a page, and opens
 * the page's watch (Server-Sent Events, read with fetch() so that it can send x-cluster-name) with the
 * page's resourceVersion; a change made in between is told by the first frame.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BrowserContext, Page } from 'playwright-core';
import { kubeRequest } from '../harness/control-plane.js';
import { CHROMIUM, launchChromium } from '../support/browser.js';
import { type ClusterApp, startClusterApp } from '../support/cluster-app.js';

describe(
  'a paged list and its watch in a console on a second origin (headless Chromium)',
  { skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} missing` },
  () => {
    let c: ClusterApp;
    let consoleServer: http.Server;
    let consoleOrigin: string;
    let profile: string;
    let browser: BrowserContext;
    let page: Page;
    const ns = `lists-browser-${process.pid}`;

    before(async () => {
      consoleServer = http.createServer((_req, res) => {
        res.setHeader('content-type', 'text/html');
        res.end('<!doctype html><title>console</title><p>console</p>');
      });
      await new Promise<void>((resolve) => consoleServer.listen(0, '127.0.0.1', resolve));
      consoleOrigin = `http://localhost:${(consoleServer.address() as AddressInfo).port}`;
      c = await startClusterApp({
        cluster: 'lists-browser',
        namespace: ns,
        listen: true,
        env: { CORS_ORIGINS: consoleOrigin },
      });
      profile = await mkdtemp(join(tmpdir(), 'cas-chromium-lists-'));
      browser = await launchChromium(profile);
      page = browser.pages()[0] ?? (await browser.newPage());
      await page.goto(`${consoleOrigin}/`, { waitUntil: 'load' });
    });
    after(async () => {
      await browser?.close();
      if (c) {
        await kubeRequest(c.cp, 'DELETE', `/api/v1/namespaces/${ns}`);
        await c.t.close();
      }
      consoleServer?.close();
      if (profile) await rm(profile, { recursive: true, force: true });
    });

    const configmap = async (name: string) => {
      const res = await kubeRequest(c.cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
    };

    test(
      'a paged watch opened with the page’s resourceVersion after a change made in between delivers that change’s notice',
      { timeout: 60_000 },
      async () => {
        await configmap('first');
        await sleep(1_100);
        const args = { base: c.base, token: c.admin, ns };
        const listed = await page.evaluate(async ({ base, token, ns }) => {
          const res = await fetch(`${base}/api/v1/configmaps/${ns}?page=1&sortBy=metadata.name`, {
            headers: { authorization: `Bearer ${token}`, 'x-cluster-name': 'lists-browser' },
          });
          const body = (await res.json()) as { total: number; metadata?: { resourceVersion?: string } };
          return { status: res.status, total: body.total, resourceVersion: body.metadata?.resourceVersion };
        }, args);
        assert.equal(listed.status, 200, JSON.stringify(listed));

        // The console is slow to open the watch: meanwhile the list changes, and the service's cache has it.
        await configmap('second');
        await sleep(1_200);

        const watched = await page.evaluate(
          async ({ base, token, ns, resourceVersion }) => {
            const opened = performance.now();
            const query = new URLSearchParams({ page: '1', sortBy: 'metadata.name', watch: 'true', resourceVersion });
            const controller = new AbortController();
            const timer = setTimeout(() => controller.abort(), 5_000);
            try {
              const res = await fetch(`${base}/api/v1/configmaps/${ns}?${query}`, {
                headers: {
                  authorization: `Bearer ${token}`,
                  'x-cluster-name': 'lists-browser',
                  accept: 'text/event-stream',
                },
                signal: controller.signal,
              });
              if (res.status !== 200) return { status: res.status, text: await res.text() };
              const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
              let text = '';
              for (;;) {
                const { value, done } = await reader.read();
                if (done) return { status: res.status, text, ended: true };
                text += value;
                const end = text.indexOf('\n\n');
                if (end < 0) continue;
                const fields = Object.fromEntries(
                  text
                    .slice(0, end)
                    .split('\n')
                    .filter((line) => !line.startsWith(':'))
                    .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trim()]),
                );
                if (!fields.data) {
                  text = text.slice(end + 2);
                  continue;
                }
                const event = JSON.parse(fields.data) as { type: string; total: number; resourceVersion: string };
                return { status: res.status, ms: performance.now() - opened, fields, event };
              }
            } catch (error) {
              return { status: 0, text: String(error) };
            } finally {
              clearTimeout(timer);
              controller.abort();
            }
          },
          { ...args, resourceVersion: listed.resourceVersion as string },
        );
        assert.equal(watched.status, 200, JSON.stringify(watched));
        const { fields, event, ms } = watched;
        if (!fields || !event || ms === undefined) return assert.fail(`no frame: ${JSON.stringify(watched)}`);
        assert.equal(fields.event, 'CHANGED');
        assert.deepEqual([event.type, event.total], ['CHANGED', listed.total + 1]);
        assert.equal(fields.id, event.resourceVersion);
        assert.ok(BigInt(event.resourceVersion) > BigInt(String(listed.resourceVersion)));
        assert.ok(ms < 1_000, `the first frame came ${ms} ms after opening`);
      },
    );
  },
);

/**
 * Swagger UI keeps working (issue 10, mechanism 4): in a real headless Chromium (Debian's `chromium`, driven by
 * playwright-core), it loads the document from the listening service, takes an API key in "Authorize", executes
 * `listUsers` and shows 200 with the users. Every request the browser makes is to the service itself.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { BrowserContext } from 'playwright-core';
import { CHROMIUM, launchChromium } from '../support/browser.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';

describe(
  'Swagger UI in a real headless Chromium',
  { skip: existsSync(CHROMIUM) ? false : `${CHROMIUM} missing` },
  () => {
    let t: TestApp;
    let base: string;
    let profile: string;
    let browser: BrowserContext;
    let apiKey: string;
    let username: string;
    const elsewhere: string[] = [];

    before(async () => {
      t = await startTestApp();
      const admin = await signedIn(t, 'admin', { username: 'swagger-admin' });
      username = admin.username;
      const key = await request(t.app, 'POST', '/api/v1/admin/apikeys', {
        token: admin.token,
        body: { name: 'swagger-ui', role: 'admin' },
      });
      assert.equal(key.status, 201, key.text);
      apiKey = key.body.key;
      await t.app.listen({ port: 0, host: '127.0.0.1' });
      base = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}`;
      profile = await mkdtemp(join(tmpdir(), 'cas-chromium-'));
      // A fresh profile (--user-data-dir) each run; Playwright passes it to Chromium.
      browser = await launchChromium(profile);
      // Nothing may leave the machine: anything not addressed to the service is refused and recorded.
      await browser.route(
        (url) => url.origin !== base,
        async (route) => {
          elsewhere.push(route.request().url());
          await route.abort();
        },
      );
    });
    after(async () => {
      await browser?.close();
      await t?.close();
      if (profile) await rm(profile, { recursive: true, force: true });
    });

    test('open /api/docs, authorize with an API key, execute listUsers: 200', { timeout: 120_000 }, async () => {
      const page = browser.pages()[0] ?? (await browser.newPage());
      const pageErrors: string[] = [];
      page.on('pageerror', (error) => pageErrors.push(error.message));
      await page.goto(`${base}/api/docs`, { waitUntil: 'load' });
      const operation = page.locator('#operations-Users-listUsers');
      await operation.waitFor({ timeout: 30_000 });

      // Authorize: the API key scheme (Authorization: <key>).
      await page.locator('.auth-wrapper .authorize').first().click();
      const scheme = page.locator('.auth-container').filter({ has: page.locator('h4', { hasText: /^apiKey/ }) });
      await scheme.locator('input').fill(apiKey);
      await scheme.locator('button.authorize').click();
      await scheme.locator('button', { hasText: 'Logout' }).waitFor();
      await page.locator('.modal-ux button.btn-done').first().click();

      await operation.locator('.opblock-summary').first().click();
      await operation.locator('.try-out__btn').click();
      await operation.locator('.execute').click();
      const status = operation.locator('.live-responses-table tr.response .response-col_status').first();
      await status.waitFor({ timeout: 30_000 });
      assert.equal((await status.innerText()).trim(), '200');
      const body = await operation
        .locator('.live-responses-table tr.response .response-col_description pre')
        .first()
        .innerText();
      assert.match(body, new RegExp(`"username": "${username}"`));
      // The request Swagger UI shows is the one it sent: the key as the whole Authorization value.
      const curl = await operation.locator('.curl-command').innerText();
      assert.match(curl, new RegExp(`Authorization: ${apiKey}`));

      // persistAuthorization: after a reload the key is still there, and an operation still runs with it.
      await page.reload({ waitUntil: 'load' });
      await operation.waitFor({ timeout: 30_000 });
      await page.locator('.auth-wrapper .authorize').first().click();
      await scheme.locator('button', { hasText: 'Logout' }).waitFor({ timeout: 10_000 });
      await page.locator('.modal-ux .close-modal').first().click();

      assert.deepEqual(pageErrors, []);
      assert.deepEqual(elsewhere, [], 'the browser contacted nothing but the service');
    });

    test(
      '"Try it out" fills in no example: the fields stay empty and the examples are shown as hints',
      {
        timeout: 120_000,
      },
      async () => {
        const page = await browser.newPage();
        await page.goto(`${base}/api/docs`, { waitUntil: 'load' });
        const operation = page.locator('#operations-Resources-listResources');
        await operation.waitFor({ timeout: 30_000 });
        await operation.locator('.opblock-summary-control').click();
        await operation.locator('.try-out__btn').click();
        await operation.locator('.execute').waitFor();
        const fields = await operation
          .locator('tr[data-param-name] input')
          .evaluateAll((inputs) =>
            inputs.map((input) => [
              `${input.closest('tr')!.dataset.paramIn}:${input.closest('tr')!.dataset.paramName}`,
              (input as unknown as { value: string }).value,
            ]),
          );
        const values = Object.fromEntries(fields) as Record<string, string>;
        for (const name of ['header:x-cluster-name', 'query:cluster', 'query:search', 'query:page', 'path:resource']) {
          assert.equal(values[name], '', `${name} is not pre-filled (${JSON.stringify(values)})`);
        }
        const text = await operation.innerText();
        assert.match(text, /Example: production/);
        assert.match(text, /Example: web/);
        await page.close();
      },
    );

    test('no literal backticks on the page: summaries, tags, and opened operations', { timeout: 120_000 }, async () => {
      const page = await browser.newPage();
      await page.goto(`${base}/api/docs`, { waitUntil: 'load' });
      await page.locator('#operations-Users-listUsers').waitFor({ timeout: 30_000 });
      // Opening all of them takes minutes; these carry parameters, headers, bodies and every kind of response.
      const opened = ['Resources-listResources', 'Resources-patchResource', 'Clusters-createCluster'];
      for (const id of opened) await page.locator(`#operations-${id} .opblock-summary-control`).click();
      await page
        .locator('.opblock.is-open')
        .nth(opened.length - 1)
        .waitFor();
      const text = await page.locator('#swagger-ui').innerText();
      const shown = text.split('\n').filter((line) => line.includes('`'));
      assert.deepEqual(shown, [], 'Markdown is rendered, not shown as such');
      await page.close();
    });
  },
);

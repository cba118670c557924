import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { waitFor } from '../harness/control-plane.js';
import { closedPort } from '../support/kubeconfigs.js';

const PASSWORD = 'huge-pages-password-1';
/** `npm start`: leading NAME=value assignments, then the command. */
const START = JSON.parse(readFileSync('package.json', 'utf8')).scripts.start as string;
const START_WORDS = START.trim().split(/\s+/);
const COMMAND_AT = START_WORDS.findIndex((word) => !/^[A-Z_]+=/.test(word));
const START_ENV = Object.fromEntries(START_WORDS.slice(0, COMMAND_AT).map((word) => word.split(/=(.*)/, 2)));
const START_COMMAND = START_WORDS.slice(COMMAND_AT);
const THP = existsSync('/sys/kernel/mm/transparent_hugepage/enabled')
  ? readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8')
  : '';

/** Page faults the process has taken so far (all its threads): /proc/<pid>/stat, minflt. */
const minorFaults = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[7]);

/**
 * argon2id fills 64 MiB per password check. glibc hands a block that large out with a fresh mmap and
 * returns it with munmap, so in 4 KiB pages every check faulted in 16,384 pages: 116 ms of a 376 ms
 * check on this VM, in the kernel. The launch line (`npm start`, the Dockerfile, scripts/start.sh) sets
 * GLIBC_TUNABLES=glibc.malloc.hugetlb=1, which asks for transparent huge pages for such blocks: ~140
 * faults and 143 ms of CPU a check.
 */
describe(
  'a password check does not fault in its 64 MiB page by page',
  {
    skip: !existsSync('dist/main.js')
      ? 'dist/main.js not built'
      : !/\[(always|madvise)\]/.test(THP)
        ? 'this kernel has no transparent huge pages'
        : false,
  },
  () => {
    let dir: string;
    let child: ChildProcess;
    let base: string;

    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'cas-thp-'));
      base = `http://127.0.0.1:${await closedPort()}`;
      const inherited = { ...process.env };
      delete inherited.GLIBC_TUNABLES; // only what `npm start` sets
      assert.equal(START_COMMAND[0], 'node', START);
      child = spawn(process.execPath, START_COMMAND.slice(1), {
        env: {
          ...inherited,
          ...START_ENV,
          PORT: new URL(base).port,
          HOST: '127.0.0.1',
          LOG_LEVEL: 'warn',
          CAS_DATA_DIR: dir,
          DATABASE_URL: `sqlite:${join(dir, 'cas.sqlite')}`,
          CAS_BOOTSTRAP_USERNAME: 'root',
          CAS_BOOTSTRAP_PASSWORD: PASSWORD,
        },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      await waitFor('the service to listen', async () => (await fetch(`${base}/readyz`).catch(() => undefined))?.ok);
    });

    after(async () => {
      child?.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    });

    const login = async () => {
      const res = await fetch(`${base}/api/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'root', password: PASSWORD }),
      });
      assert.equal(res.status, 200, await res.text());
    };

    test('every launch line sets the tunable; five logins fault in less than a quarter of 5 × 64 MiB', async () => {
      assert.equal(START_ENV.GLIBC_TUNABLES, 'glibc.malloc.hugetlb=1', `npm start: ${START}`);
      assert.match(readFileSync('Dockerfile', 'utf8'), /^ENV GLIBC_TUNABLES=glibc\.malloc\.hugetlb=1$/m);
      assert.match(
        readFileSync('scripts/start.sh', 'utf8'),
        /^exec env GLIBC_TUNABLES=glibc\.malloc\.hugetlb=1 node /m,
      );

      await login(); // the first check also starts the thread pool and compiles the route
      const before = minorFaults(child.pid!);
      for (let i = 0; i < 5; i++) await login();
      const perLogin = (minorFaults(child.pid!) - before) / 5;
      // 64 MiB in 4 KiB pages is 16,384 faults; in 2 MiB pages, 32.
      assert.ok(perLogin < 4096, `${perLogin} page faults per login`);
    });
  },
);

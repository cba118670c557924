// The real Helm CLI for the tests (helm v3.17 from `bash scripts/kube/ensure-layer.sh 30`, or HELM_BIN), and a
// small local chart: several objects, a Secret, a hook (a ConfigMap: the test clusters run no pods) and notes.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** Where the tests find helm: HELM_BIN, else the layer's cache (ensure-layer.sh 30). */
export function helmBinary(): string | undefined {
  const root =
    process.env.CAS_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'cluster-admin-service');
  const found = process.env.HELM_BIN || join(root, 'kubectl-layer-v30', 'helm');
  return existsSync(found) ? found : undefined;
}

export interface HelmRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs helm with a kubeconfig and a HOME of its own. */
export function runHelm(
  binary: string,
  home: string,
  kubeconfig: string,
  args: string[],
  timeoutMs = 60_000,
): Promise<HelmRun> {
  return new Promise((resolve) => {
    execFile(
      binary,
      [...args, '--kubeconfig', kubeconfig],
      {
        env: {
          PATH: process.env.PATH ?? '',
          HOME: home,
          HELM_CACHE_HOME: join(home, 'cache'),
          HELM_CONFIG_HOME: join(home, 'config'),
          HELM_DATA_HOME: join(home, 'data'),
        },
        timeout: timeoutMs,
        maxBuffer: 64 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

/** Writes the test chart `name` (version `version`) under `dir`; returns its folder. */
export async function writeChart(dir: string, name = 'shop', version = '0.1.0', appVersion = '1.2.3'): Promise<string> {
  const chart = join(dir, `${name}-${version}`);
  await mkdir(join(chart, 'templates'), { recursive: true });
  const files: Record<string, string> = {
    'Chart.yaml': `apiVersion: v2\nname: ${name}\nversion: ${version}\nappVersion: "${appVersion}"\ndescription: A test chart\ntype: application\n`,
    'values.yaml':
      'replicas: 1\nimage:\n  repository: nginx\n  tag: "1.25"\npassword: changeme\ngreeting: hello\nextra: {}\n',
    'templates/configmap.yaml':
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\n  labels:\n    app: {{ .Release.Name }}\ndata:\n  greeting: {{ .Values.greeting | quote }}\n',
    'templates/secret.yaml':
      'apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-secret\ntype: Opaque\nstringData:\n  password: {{ .Values.password | quote }}\n',
    'templates/service.yaml':
      'apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}-web\nspec:\n  selector:\n    app: {{ .Release.Name }}\n  ports:\n    - port: 80\n',
    'templates/deployment.yaml':
      'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-web\nspec:\n  replicas: {{ .Values.replicas }}\n  selector:\n    matchLabels:\n      app: {{ .Release.Name }}\n  template:\n    metadata:\n      labels:\n        app: {{ .Release.Name }}\n    spec:\n      containers:\n        - name: web\n          image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"\n',
    'templates/hook.yaml':
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-hook\n  annotations:\n    "helm.sh/hook": post-install,post-upgrade\n    "helm.sh/hook-delete-policy": before-hook-creation\ndata:\n  revision: "{{ .Release.Revision }}"\n',
    'templates/NOTES.txt':
      'Release {{ .Release.Name }} of {{ .Chart.Name }} in {{ .Release.Namespace }}.\nGreeting: {{ .Values.greeting }}\n',
  };
  for (const [file, text] of Object.entries(files)) await writeFile(join(chart, file), text);
  return chart;
}

/** `helm list`'s Go time ("2026-11-27 20:15:03.123456789 +0000 UTC") as milliseconds since the epoch. */
export function goTimeMs(value: string): number {
  const m = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(\.\d+)? ([+-]\d\d)(\d\d)/.exec(value);
  if (!m) return NaN;
  return Date.parse(`${m[1]}T${m[2]}${(m[3] ?? '').slice(0, 4)}${m[4]}:${m[5]}`);
}

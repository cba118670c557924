/**
 * The bounds of what a console may ask a debug container or node shell to run: an image reference, a
 * container name, a command. Each is checked for length and characters here, before anything reaches a
 * cluster, and none is ever given to a shell: the command is the container's argv, run by the runtime.
 */

/** A container name, as Kubernetes takes it: a DNS label of at most 63 characters. */
export const CONTAINER_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const MAX_CONTAINER_NAME = 63;

/** The longest image reference taken (registry, path, tag and digest together). */
export const MAX_IMAGE = 512;
/** A path component of an image's name (the distribution reference grammar). */
const COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
/**
 * `[registry[:port]/]path[:tag][@sha256:digest]`, as container runtimes parse it. Nothing else — no
 * spaces, quotes, `$`, `;`, control characters — can be in one.
 */
const IMAGE = new RegExp(
  `^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?/)?${COMPONENT}(?:/${COMPONENT})*` +
    '(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$',
);

export const MAX_COMMAND_ARGS = 64;
export const MAX_COMMAND_ARG = 4096;
export const MAX_COMMAND_BYTES = 16 * 1024;
/** Control characters (a tab aside): no argv needs them, and a terminal or log would print them. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]/;

/** Why an image reference is refused, or null. */
export function imageProblem(value: unknown): string | null {
  if (typeof value !== 'string' || value === '') return 'image must be a non-empty string';
  if (value.length > MAX_IMAGE) return `image must be at most ${MAX_IMAGE} characters`;
  if (!IMAGE.test(value)) {
    return "image must be an image reference ('[registry[:port]/]name[:tag][@sha256:digest]': lower-case name components, no spaces or shell characters)";
  }
  return null;
}

/** Why a container name (`field`: name, target) is refused, or null. */
export function containerNameProblem(field: string, value: unknown): string | null {
  if (typeof value !== 'string' || value === '') return `${field} must be a non-empty string`;
  if (value.length > MAX_CONTAINER_NAME) return `${field} must be at most ${MAX_CONTAINER_NAME} characters`;
  if (!CONTAINER_NAME.test(value)) {
    return `${field} must be a container name: lower-case letters, digits and '-', starting and ending with a letter or digit`;
  }
  return null;
}

/** Why a command (the container's argv, never a shell line) is refused, or null. */
export function commandProblem(value: unknown): string | null {
  if (!Array.isArray(value) || value.length === 0) return 'command must be a non-empty array of strings (the argv)';
  if (value.length > MAX_COMMAND_ARGS) return `command must have at most ${MAX_COMMAND_ARGS} arguments`;
  let bytes = 0;
  for (const [i, arg] of value.entries()) {
    if (typeof arg !== 'string') return `command[${i}] must be a string`;
    if (arg.length > MAX_COMMAND_ARG) return `command[${i}] must be at most ${MAX_COMMAND_ARG} characters`;
    if (CONTROL.test(arg)) return `command[${i}] must not contain control characters`;
    bytes += Buffer.byteLength(arg);
  }
  if (value[0] === '') return 'command[0] (the program) must not be empty';
  if (bytes > MAX_COMMAND_BYTES) return `command must be at most ${MAX_COMMAND_BYTES} bytes in all`;
  return null;
}

/** Which object the cluster's `pods/ephemeralcontainers` subresource takes, by its version. */
export type EphemeralApi = 'EphemeralContainers' | 'Pod';

/**
 * `EphemeralContainers` on v1.16–v1.21 (alpha, behind the EphemeralContainers feature gate), `Pod` from
 * v1.22; null before v1.16, which has none. `minor` as `/version` reports it (`"20"`, `"20+"`).
 */
export function ephemeralApiOf(major: string, minor: string): EphemeralApi | null {
  const ma = Number.parseInt(major, 10);
  const mi = Number.parseInt(minor, 10);
  if (!Number.isInteger(ma) || !Number.isInteger(mi)) return null;
  if (ma > 1 || (ma === 1 && mi >= 22)) return 'Pod';
  if (ma === 1 && mi >= 16) return 'EphemeralContainers';
  return null;
}

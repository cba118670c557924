// The generated client names the DOM's `BodyInit`; Node's fetch has the same type in undici-types (no DOM lib here).
type BodyInit = import('undici-types').BodyInit;

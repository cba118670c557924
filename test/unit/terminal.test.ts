import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AsciicastRecording, MAX_RECORDING_BYTES } from '../../src/terminal/recording.js';
import { channelOf, exitCodeOf, offeredProtocols, upstreamProtocol } from '../../src/terminal/terminal-protocol.js';

describe('terminal protocol and recording', () => {
  test('the bearer subprotocol is taken out of the offered protocols and decoded', () => {
    const token = 'cas_sess_abc-DEF_123';
    const offered = offeredProtocols(
      `base64url.bearer.authorization.k8s.io.${Buffer.from(token).toString('base64url')}, v4.channel.k8s.io`,
    );
    assert.equal(offered.token, token);
    assert.deepEqual(offered.protocols, ['v4.channel.k8s.io']);
    assert.deepEqual(offeredProtocols(undefined), { token: undefined, protocols: [] });
  });

  test('portforward.k8s.io is the kubelet’s v4 binary framing upstream', () => {
    assert.equal(upstreamProtocol('portforward.k8s.io'), 'v4.channel.k8s.io');
    assert.equal(upstreamProtocol('v4.base64.channel.k8s.io'), 'v4.base64.channel.k8s.io');
  });

  test('channels are read in both framings', () => {
    assert.deepEqual(channelOf(Buffer.from([1, 104, 105]), false), { channel: 1, payload: Buffer.from('hi') });
    assert.deepEqual(channelOf(Buffer.from('2' + Buffer.from('hi').toString('base64')), true), {
      channel: 2,
      payload: Buffer.from('hi'),
    });
    assert.equal(channelOf(Buffer.alloc(0), false), undefined);
  });

  test('exit codes from the v4 error channel', () => {
    assert.equal(exitCodeOf(Buffer.from('{"metadata":{},"status":"Success"}')), 0);
    const failure = {
      status: 'Failure',
      reason: 'NonZeroExitCode',
      details: { causes: [{ reason: 'ExitCode', message: '42' }] },
    };
    assert.equal(exitCodeOf(Buffer.from(JSON.stringify(failure))), 42);
    assert.equal(exitCodeOf(Buffer.from('not json')), undefined);
  });

  test('a recording stops at 1 MiB with a marker, and stays valid asciicast v2', () => {
    const cast = new AsciicastRecording('t', 80, 24, 0);
    const chunk = 'x'.repeat(10_000);
    for (let i = 0; i < 200; i++) cast.output(chunk, i);
    const text = cast.toString();
    assert.ok(Buffer.byteLength(text) <= MAX_RECORDING_BYTES, `${Buffer.byteLength(text)} bytes`);
    assert.ok(cast.isTruncated);
    const lines = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(lines[0].version, 2);
    assert.match(lines.at(-1)[2], /recording truncated/);
  });
});

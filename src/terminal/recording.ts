/** The largest recording kept per session. */
export const MAX_RECORDING_BYTES = 1024 * 1024;
const MARKER = '\r\n[recording truncated: it reached 1 MiB]\r\n';
/** Room kept for the marker's lines. */
const RESERVE = 256;

/**
 * A terminal's output as asciicast v2 (https://docs.asciinema.org/manual/asciicast/v2/): a header line,
 * then `[seconds, "o", text]` for output and `[seconds, "r", "COLSxROWS"]` for resizes. Input is never
 * given to it. At most MAX_RECORDING_BYTES: past that a marker line ends it and output is dropped.
 */
export class AsciicastRecording {
  private readonly lines: string[] = [];
  private bytes = 0;
  private truncated = false;
  private readonly startedAt: number;

  constructor(title: string, width = 80, height = 24, now = Date.now()) {
    this.startedAt = now;
    this.push(
      JSON.stringify({ version: 2, width, height, timestamp: Math.floor(now / 1000), title, env: { TERM: 'xterm' } }),
    );
  }

  output(text: string, now = Date.now()): void {
    if (text !== '') this.event('o', text, now);
  }

  resize(cols: number, rows: number, now = Date.now()): void {
    this.event('r', `${cols}x${rows}`, now);
  }

  get isTruncated(): boolean {
    return this.truncated;
  }

  toString(): string {
    return this.lines.join('\n') + '\n';
  }

  private event(type: 'o' | 'r', data: string, now: number): void {
    if (this.truncated) return;
    const line = JSON.stringify([this.seconds(now), type, data]);
    if (this.bytes + Buffer.byteLength(line) + 1 > MAX_RECORDING_BYTES - RESERVE) {
      this.truncated = true;
      this.push(JSON.stringify([this.seconds(now), 'o', MARKER]));
      return;
    }
    this.push(line);
  }

  private seconds(now: number): number {
    return Math.round(now - this.startedAt) / 1000;
  }

  private push(line: string): void {
    this.lines.push(line);
    this.bytes += Buffer.byteLength(line) + 1;
  }
}

/**
 * The server's stderr in the output channel, at the level each line was logged at.
 *
 * Owns: reading the level from the server's log format
 * (`2026-01-02 03:04:05,678 WARNING adaptrack_lsp.x: message`, see adaptrack_lsp/cli.py)
 * and giving lines without one (traceback frames, a message's later lines) the level of
 * the record they belong to.  A Python traceback that no log record announced is an error.
 * No `vscode` import: the channel is any object with the four level methods.
 */
import type { Readable } from 'node:stream';
import * as readline from 'node:readline';

export type ServerLogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface LevelledLog {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

const RECORD = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) (.*)$/;
const LEVELS: Record<string, ServerLogLevel> = {
  DEBUG: 'debug',
  INFO: 'info',
  WARNING: 'warn',
  ERROR: 'error',
  CRITICAL: 'error',
};

/** Splits the server's stderr into lines with their levels (one instance per process). */
export class ServerLogReader {
  private level: ServerLogLevel = 'info';

  /** The level and text (without timestamp and level) of one stderr line. */
  classify(line: string): { level: ServerLogLevel; text: string } {
    const record = RECORD.exec(line);
    if (record) {
      this.level = LEVELS[record[1]];
      return { level: this.level, text: record[2] };
    }
    if (line.startsWith('Traceback (most recent call last)')) {
      this.level = 'error';
    }
    return { level: this.level, text: line };
  }

  write(line: string, log: LevelledLog): void {
    const { level, text } = this.classify(line);
    log[level](text);
  }
}

/** `stdioOptions.stderr` of the language client: each stderr line at its level. */
export function pipeServerStderr(input: Readable, log: LevelledLog): void {
  const reader = new ServerLogReader();
  readline
    .createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 })
    .on('line', (line) => reader.write(line, log));
}

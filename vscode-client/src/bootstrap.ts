/**
 * The server's private environment: a virtual environment in the extension's global
 * storage with the server installed from the wheel the `.vsix` carries (`server/*.whl`,
 * put there by `make dist`).
 *
 * Owns: where that environment lives, whether it is there and current (a stamp file
 * names the wheel installed; another wheel, after an extension update, means upgrade),
 * whether it is broken (its interpreter does not import the server), finding a base
 * Python >= 3.10, creating the environment and running pip with its output streamed
 * line by line, and turning each failure into one message with the exact manual
 * command (offline, storage not writable, Python too old, pip failing).  No `vscode`
 * import, so all of it is unit-tested under plain node against real interpreters.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Oldest Python the server supports (pyproject's requires-python). */
export const MIN_PYTHON: readonly [number, number] = [3, 10];
/** Interpreter names tried as the base of the private environment, after the given ones. */
export const BASE_CANDIDATES = process.platform === 'win32' ? ['py', 'python'] : ['python3', 'python3.13', 'python3.12', 'python3.11', 'python3.10', 'python'];
const STAMP = 'adaptrack-wheel.txt';
/** how long pip may run (a slow network: minutes) and a probe of an interpreter */
export const INSTALL_TIMEOUT_MS = 15 * 60 * 1000;
export const PROBE_TIMEOUT_MS = 20 * 1000;

export interface PrivateEnv {
  /** the environment folder */
  dir: string;
  /** its interpreter */
  python: string;
  /** the file naming the wheel installed (written last, on success only) */
  stamp: string;
}

export function privateEnv(storageDir: string): PrivateEnv {
  const dir = path.join(storageDir, 'server-env');
  const python = process.platform === 'win32' ? path.join(dir, 'Scripts', 'python.exe') : path.join(dir, 'bin', 'python');
  return { dir, python, stamp: path.join(dir, STAMP) };
}

/** The server wheel the extension carries, or undefined (a development build). */
export function bundledWheel(extensionDir: string): string | undefined {
  const folder = path.join(extensionDir, 'server');
  try {
    const wheels = fs.readdirSync(folder).filter((name) => /^adaptrack_lsp-.+\.whl$/.test(name)).sort();
    return wheels.length ? path.join(folder, wheels[wheels.length - 1]) : undefined;
  } catch {
    return undefined;
  }
}

export interface RunResult {
  code: number | null;
  output: string;
  /** why it could not run at all (ENOENT, EACCES, timeout) */
  error?: string;
}

/** Run a command, time-limited, streaming each output line to `onLine`. */
export function runCommand(command: string, args: string[], options: { timeoutMs: number; onLine?: (line: string) => void; env?: NodeJS.ProcessEnv; cwd?: string }): Promise<RunResult> {
  return new Promise((resolve) => {
    let output = '';
    let pending = '';
    let settled = false;
    const finish = (result: RunResult) => {
      if (!settled) {
        settled = true;
        clearTimeout(timer);
        resolve(result);
      }
    };
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn(command, args, { env: options.env ?? process.env, cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (error) {
      resolve({ code: null, output: '', error: String(error) });
      return;
    }
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      finish({ code: null, output, error: `did not finish within ${Math.round(options.timeoutMs / 1000)} s` });
    }, options.timeoutMs);
    const take = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      output += text;
      pending += text;
      const lines = pending.split(/\r?\n|\r/);
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (line.trim()) {
          options.onLine?.(line);
        }
      }
    };
    child.stdout?.on('data', take);
    child.stderr?.on('data', take);
    child.on('error', (error) => finish({ code: null, output, error: error.message }));
    child.on('close', (code) => {
      if (pending.trim()) {
        options.onLine?.(pending);
      }
      finish({ code, output });
    });
  });
}

/** (major, minor) of an interpreter, or undefined when it does not run. */
export async function pythonVersion(python: string): Promise<[number, number] | undefined> {
  const result = await runCommand(python, ['-c', 'import sys; print(sys.version_info[0], sys.version_info[1])'], { timeoutMs: PROBE_TIMEOUT_MS });
  const found = /^(\d+) (\d+)\s*$/m.exec(result.output);
  return result.code === 0 && found ? [Number(found[1]), Number(found[2])] : undefined;
}

/** Whether `python` imports the server (the check `-m adaptrack_lsp serve` needs);
 * `isolated`: without PYTHONPATH, so that only the environment's own packages count. */
export async function hasServer(python: string, isolated = false): Promise<boolean> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  if (isolated) {
    delete env.PYTHONPATH;
  }
  const result = await runCommand(python, ['-c', 'import adaptrack_lsp.cli'], { timeoutMs: PROBE_TIMEOUT_MS, env });
  return result.code === 0;
}

export type EnvState = 'missing' | 'current' | 'outdated' | 'broken';

/**
 * The private environment's state for `wheel`: missing (never set up, or a setup that did
 * not finish), current, outdated (set up from another wheel: upgrade), broken (set up,
 * but its interpreter no longer imports the server: deleted files, a removed base Python).
 */
export async function envState(env: PrivateEnv, wheel: string): Promise<EnvState> {
  let stamp: string;
  try {
    stamp = fs.readFileSync(env.stamp, 'utf8').trim();
  } catch {
    return 'missing';
  }
  if (!(await hasServer(env.python, true))) {
    return 'broken';
  }
  return stamp === path.basename(wheel) ? 'current' : 'outdated';
}

/** The first interpreter of `candidates` (then `BASE_CANDIDATES`) that is Python >= 3.10. */
export async function findBasePython(candidates: (string | undefined)[]): Promise<{ python?: string; tooOld: string[] }> {
  const tooOld: string[] = [];
  const seen = new Set<string>();
  for (const candidate of [...candidates, ...BASE_CANDIDATES]) {
    if (!candidate || seen.has(candidate)) {
      continue;
    }
    seen.add(candidate);
    const version = await pythonVersion(candidate);
    if (!version) {
      continue;
    }
    if (version[0] > MIN_PYTHON[0] || (version[0] === MIN_PYTHON[0] && version[1] >= MIN_PYTHON[1])) {
      return { python: candidate, tooOld };
    }
    tooOld.push(`${candidate} (Python ${version[0]}.${version[1]})`);
  }
  return { tooOld };
}

const quote = (part: string) => (/[\s'"$`\\]/.test(part) ? `'${part.replace(/'/g, `'\\''`)}'` : part);

/** The commands a person runs to do what `setUp` does. */
export function manualCommand(basePython: string, env: PrivateEnv, wheel: string): string {
  return `${quote(basePython)} -m venv ${quote(env.dir)} && ${quote(env.python)} -m pip install ${quote(wheel)}`;
}

/** pip's output says the package index could not be reached. */
export function looksOffline(output: string): boolean {
  return /NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution|Name or service not known|Network is unreachable|No matching distribution found|Could not find a version that satisfies|ConnectTimeout|ReadTimeout|ProxyError|SSLError/i.test(
    output,
  );
}

export class SetupError extends Error {}

/**
 * Create (or upgrade) the private environment from `wheel`.  `say` gets short progress
 * messages, `onLine` every line of venv's and pip's output.  Throws `SetupError` whose
 * message is one sentence naming the fix and the exact manual command.
 */
export async function setUp(
  env: PrivateEnv,
  wheel: string,
  candidates: (string | undefined)[],
  say: (message: string) => void,
  onLine: (line: string) => void,
  options: { upgrade?: boolean; env?: NodeJS.ProcessEnv } = {},
): Promise<void> {
  const base = await findBasePython(candidates);
  if (!base.python) {
    const found = base.tooOld.length ? `only ${base.tooOld.join(', ')} found` : 'no Python interpreter found on PATH';
    throw new SetupError(
      `the server needs Python ${MIN_PYTHON.join('.')} or newer (${found}): install one, then run "adaptrack: Set Up Server" (or set adaptrack.serverInterpreter to an interpreter with adaptrack-lsp installed)`,
    );
  }
  const manual = manualCommand(base.python, env, wheel);
  const storage = path.dirname(env.dir);
  try {
    fs.mkdirSync(storage, { recursive: true });
    fs.accessSync(storage, fs.constants.W_OK);
  } catch (error) {
    throw new SetupError(
      `cannot write the extension's storage ${storage} (${(error as NodeJS.ErrnoException).code ?? String(error)}): install the server yourself (python3 -m pip install ${quote(wheel)}) and set adaptrack.serverInterpreter to that interpreter`,
    );
  }
  const runEnv: NodeJS.ProcessEnv = { ...(options.env ?? process.env), PIP_DISABLE_PIP_VERSION_CHECK: '1', PYTHONNOUSERSITE: '1' };
  delete runEnv.PYTHONPATH;
  delete runEnv.VIRTUAL_ENV;
  if (!options.upgrade || !fs.existsSync(env.python)) {
    try {
      fs.rmSync(env.dir, { recursive: true, force: true }); // a half-made or broken one
    } catch {
      // reported by venv below
    }
    say(`creating the environment with ${base.python}`);
    const venv = await runCommand(base.python, ['-m', 'venv', env.dir], { timeoutMs: 5 * 60 * 1000, onLine, env: runEnv });
    if (venv.code !== 0) {
      const tail = (venv.error ?? venv.output.trim().split('\n').slice(-1)[0] ?? '').trim();
      const ensurepip = /ensurepip|python3(\.\d+)?-venv/.test(venv.output) ? ' (on Debian/Ubuntu: apt install python3-venv)' : '';
      throw new SetupError(`could not create the server's environment with ${base.python}${ensurepip}: ${tail}; by hand: ${manual}`);
    }
  }
  say(`installing ${path.basename(wheel)} and its dependencies with pip`);
  const pip = await runCommand(
    env.python,
    ['-m', 'pip', 'install', '--upgrade', '--progress-bar', 'off', '--timeout', '20', '--retries', '1', wheel],
    { timeoutMs: INSTALL_TIMEOUT_MS, onLine, env: runEnv },
  );
  if (pip.code !== 0) {
    const why = pip.error ?? (looksOffline(pip.output) ? 'the package index could not be reached (offline?)' : pip.output.trim().split('\n').slice(-1)[0]);
    throw new SetupError(`installing the server failed: ${why}; once online, run "adaptrack: Set Up Server", or by hand: ${manual}`);
  }
  if (!(await hasServer(env.python, true))) {
    throw new SetupError(`the server was installed but does not import in ${env.python}; by hand: ${manual}`);
  }
  fs.writeFileSync(env.stamp, `${path.basename(wheel)}\n`);
}

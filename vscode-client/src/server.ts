/**
 * How the language server process is launched.
 *
 * Owns: choosing the interpreter that runs `python -m adaptrack_lsp serve` (the
 * `adaptrack.serverInterpreter` setting, else the server's private environment set up by
 * the extension, else the Python extension's active interpreter, else `python3`) and the full launch description (command, arguments, cwd, env).  The
 * working directory is never the workspace: `python -m` puts it first on `sys.path`, and
 * a workspace `queue.py` or `token.py` would then run inside the server.  No
 * `vscode` import, so the protocol test starts the server exactly as the extension does.
 */
import { expandPathVariables, PathContext } from './settings';

export const SERVER_MODULE = 'adaptrack_lsp';
export const FALLBACK_INTERPRETER = process.platform === 'win32' ? 'python' : 'python3';

export type InterpreterSource = 'setting' | 'private-env' | 'python-extension' | 'fallback';

export interface ServerLaunch {
  command: string;
  args: string[];
  cwd?: string;
  env: Record<string, string | undefined>;
  /** where the interpreter came from, for the log */
  interpreterSource: InterpreterSource;
}

export interface LaunchInputs {
  /** `adaptrack.serverInterpreter` (null or empty: not set) */
  serverInterpreter: string | null;
  /** `adaptrack.serverArgs` */
  serverArgs: string[];
  /** the interpreter of the server's private environment (`bootstrap.ts`), when set up */
  privateInterpreter?: string | null;
  /** the Python extension's active interpreter, when that extension is installed and has one */
  pythonExtensionInterpreter?: string | null;
  pathContext?: PathContext;
  /** base environment of the server process (default: this process's) */
  env?: Record<string, string | undefined>;
  /** working directory of the server: a folder without Python files (default: the extension's own) */
  serverCwd?: string;
  /** variables added to the server's environment (the API key from secret storage); never logged */
  secretEnv?: Record<string, string>;
}

/** The secret-storage key under which the inference server's API key is kept. */
export const API_KEY_SECRET = 'adaptrack.serverApiKey';

/**
 * The environment entry that hands the API key from VS Code's secret storage to the
 * server: `{[apiKeyEnv]: key}`, or nothing without a key or with a name that is not an
 * environment variable's.
 */
export function apiKeyEnvironment(apiKeyEnv: string, key: string | undefined): Record<string, string> {
  const name = apiKeyEnv.trim();
  if (!key || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
    return {};
  }
  return { [name]: key };
}

/** The extension's own folder: holds no `.py` file that `python -m` could import. */
export const NEUTRAL_CWD = __dirname;

/** The interpreter that runs the server, and where it came from. */
export function resolveInterpreter(inputs: LaunchInputs): { interpreter: string; source: InterpreterSource } {
  const configured = inputs.serverInterpreter?.trim();
  // `${env:NAME}` of an unset variable expands to nothing: that counts as "not set"
  const expanded = configured ? expandPathVariables(configured, inputs.pathContext).trim() : '';
  if (expanded) {
    return { interpreter: expanded, source: 'setting' };
  }
  const fromPrivateEnv = inputs.privateInterpreter?.trim();
  if (fromPrivateEnv) {
    return { interpreter: fromPrivateEnv, source: 'private-env' };
  }
  const fromPythonExtension = inputs.pythonExtensionInterpreter?.trim();
  if (fromPythonExtension) {
    return { interpreter: fromPythonExtension, source: 'python-extension' };
  }
  return { interpreter: FALLBACK_INTERPRETER, source: 'fallback' };
}

/** `<interpreter> -m adaptrack_lsp serve [serverArgs...]`, speaking LSP over stdio. */
export function buildServerLaunch(inputs: LaunchInputs): ServerLaunch {
  const { interpreter, source } = resolveInterpreter(inputs);
  const env = { ...(inputs.env ?? process.env), ...(inputs.secretEnv ?? {}), PYTHONUNBUFFERED: '1' };
  return {
    command: interpreter,
    args: ['-m', SERVER_MODULE, 'serve', ...inputs.serverArgs],
    cwd: inputs.serverCwd ?? NEUTRAL_CWD,
    env,
    interpreterSource: source,
  };
}

/** One line for the output channel. */
export function describeLaunch(launch: ServerLaunch): string {
  const quote = (part: string) => (/\s/.test(part) ? JSON.stringify(part) : part);
  return `${[launch.command, ...launch.args].map(quote).join(' ')} (interpreter from ${launch.interpreterSource})`;
}

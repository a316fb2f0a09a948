/**
 * Typed extension settings and their mapping to the server's settings object.
 *
 * Owns: reading the `adaptrack.*` configuration, path variable expansion, and
 * `toServerSettings`, the camelCase object sent as `initializationOptions` and, wrapped
 * as `{adaptrack: ...}`, in `workspace/didChangeConfiguration`.  No `vscode` import at
 * runtime, so the mapping is unit-tested under plain node.
 */
import * as os from 'node:os';
import * as path from 'node:path';

export const SECTION = 'adaptrack';

export type Device = 'auto' | 'cpu' | 'cuda' | 'mps' | `cuda:${number}`;
export type Dtype = 'auto' | 'float32' | 'bfloat16' | 'float16';
export type KvCache = 'auto' | 'static' | 'dynamic';
export type Backend = 'auto' | 'transformers' | 'llamacpp' | 'server';
export type Diagnostics = 'off' | 'hint' | 'warning' | 'error';

/** The server's settings, camelCase as on the wire (see `adaptrack_lsp.config.Settings`). */
export interface ServerSettings {
  model: string;
  device: Device;
  dtype: Dtype;
  kvCache: KvCache;
  threads: number | null;
  gpuLayers: number | null;
  decoder: string;
  listDecoder: string;
  temperature: number;
  numSamples: number;
  maxNewTokens: number;
  contextTokens: number | null;
  maxBacktrackDistance: number | null;
  topPValidity: number;
  pythonPath: string | null;
  apiSnapshot: string | null;
  versionTargets: string[];
  runtimeIntrospection: boolean;
  keywordArguments: boolean;
  timeoutMs: number;
  multiline: boolean;
  diagnostics: Diagnostics;
  avoidDeprecated: boolean;
  syntaxConstraint: boolean;
  trustRemoteCode: boolean;
  backend: Backend;
  endpoint: string;
  tokenizer: string;
  serverModel: string;
  apiKeyEnv: string;
  serverTopLogprobs: number;
  serverLookahead: number;
  serverTimeoutMs: number;
  trustedWorkspace: boolean;
}

/** Settings that only the editor client reads. */
export interface ClientSettings {
  enable: boolean;
  serverInterpreter: string | null;
  serverArgs: string[];
}

export type ExtensionSettings = ServerSettings & ClientSettings;

export const SERVER_DEFAULTS: Readonly<ServerSettings> = Object.freeze({
  model: 'builtin',
  device: 'auto',
  dtype: 'auto',
  kvCache: 'auto',
  threads: null,
  gpuLayers: null,
  decoder: 'adaptrack',
  listDecoder: 'exact',
  temperature: 0,
  numSamples: 5,
  maxNewTokens: 48,
  contextTokens: null,
  maxBacktrackDistance: null,
  topPValidity: 1,
  pythonPath: null,
  apiSnapshot: null,
  versionTargets: [],
  runtimeIntrospection: true,
  keywordArguments: true,
  timeoutMs: 3000,
  multiline: false,
  diagnostics: 'warning',
  avoidDeprecated: false,
  syntaxConstraint: true,
  trustRemoteCode: false,
  backend: 'auto',
  endpoint: '',
  tokenizer: '',
  serverModel: '',
  apiKeyEnv: 'ADAPTRACK_API_KEY',
  serverTopLogprobs: 20,
  serverLookahead: 32,
  serverTimeoutMs: 10000,
  trustedWorkspace: false,
});

export const CLIENT_DEFAULTS: Readonly<ClientSettings> = Object.freeze({
  enable: true,
  serverInterpreter: null,
  serverArgs: [],
});

/**
 * Server settings the client fills in itself, never from the configuration (so a
 * workspace's settings file cannot set them): `trustedWorkspace` is VS Code's workspace trust.
 */
export const CLIENT_PROVIDED_SETTINGS: readonly (keyof ServerSettings)[] = ['trustedWorkspace'];

/** Server setting names, in the order the server documents them. */
export const SERVER_SETTING_NAMES = Object.keys(SERVER_DEFAULTS) as (keyof ServerSettings)[];
export const CLIENT_SETTING_NAMES = Object.keys(CLIENT_DEFAULTS) as (keyof ClientSettings)[];

/** Settings whose change needs a new server process (the others go through didChangeConfiguration). */
export const RESTART_SETTING_NAMES: readonly (keyof ClientSettings)[] = ['serverInterpreter', 'serverArgs'];

/** Server settings holding a file system path (variables and `~` are expanded). */
const PATH_SETTINGS: readonly (keyof ServerSettings)[] = ['pythonPath', 'apiSnapshot'];

/** The part of `vscode.WorkspaceConfiguration` this module needs. */
export interface ConfigurationLike {
  get<T>(section: string): T | undefined;
}

/** Where variables in path settings point. */
export interface PathContext {
  workspaceFolder?: string;
  /** `vscode.workspace.isTrusted`: sent as the server setting `trustedWorkspace` */
  workspaceTrusted?: boolean;
  userHome?: string;
  env?: Record<string, string | undefined>;
}

/**
 * Expand `${workspaceFolder}`, `${userHome}`, `${env:NAME}` and a leading `~`.
 * A variable that cannot be resolved raises, naming it: a silently wrong path would
 * make the server analyse the wrong environment.
 */
export function expandPathVariables(value: string, context: PathContext = {}): string {
  const home = context.userHome ?? os.homedir();
  const env = context.env ?? process.env;
  let expanded = value.replace(/\$\{([^}]+)\}/g, (_match, name: string) => {
    if (name === 'workspaceFolder') {
      if (!context.workspaceFolder) {
        throw new Error(`\${workspaceFolder} in "${value}" needs an open workspace folder`);
      }
      return context.workspaceFolder;
    }
    if (name === 'userHome') {
      return home;
    }
    if (name.startsWith('env:')) {
      return env[name.slice(4)] ?? '';
    }
    throw new Error(`unknown variable \${${name}} in "${value}"`);
  });
  if (expanded === '~' || expanded.startsWith('~/') || expanded.startsWith('~\\')) {
    expanded = path.join(home, expanded.slice(1));
  }
  return expanded;
}

function emptyToNull(value: string | null | undefined): string | null {
  return value === undefined || value === null || value.trim() === '' ? null : value;
}

/** Read every `adaptrack.*` setting, falling back to the defaults for missing ones. */
export function readSettings(config: ConfigurationLike): ExtensionSettings {
  const settings: Record<string, unknown> = {};
  for (const [name, fallback] of Object.entries({ ...SERVER_DEFAULTS, ...CLIENT_DEFAULTS })) {
    const value = config.get<unknown>(name);
    settings[name] = value === undefined ? fallback : value;
  }
  const result = settings as unknown as ExtensionSettings;
  result.serverInterpreter = emptyToNull(result.serverInterpreter);
  result.pythonPath = emptyToNull(result.pythonPath);
  result.apiSnapshot = emptyToNull(result.apiSnapshot);
  result.serverArgs = Array.isArray(result.serverArgs) ? result.serverArgs.map(String) : [];
  return result;
}

/**
 * The settings object the server receives: exactly the server's keys (client-only keys
 * are left out), camelCase, explicit `null` for unset optional values (the server reads
 * null as "use the default"), path variables expanded.  Values are passed through
 * unchanged otherwise: the server validates them and names any bad one in a warning.
 */
export function toServerSettings(settings: Partial<ExtensionSettings>, context: PathContext = {}): ServerSettings {
  const result: Record<string, unknown> = {};
  for (const name of SERVER_SETTING_NAMES) {
    const value = settings[name];
    result[name] = value === undefined ? SERVER_DEFAULTS[name] : value;
  }
  for (const name of PATH_SETTINGS) {
    const value = emptyToNull(result[name] as string | null);
    result[name] = value === null ? null : expandPathVariables(value, context);
  }
  // workspace trust comes from VS Code, not from any settings file
  result.trustedWorkspace = context.workspaceTrusted === true;
  return result as unknown as ServerSettings;
}

/** `initializationOptions`: the settings object itself (protocol contract). */
export function toInitializationOptions(settings: Partial<ExtensionSettings>, context: PathContext = {}): ServerSettings {
  return toServerSettings(settings, context);
}

/** `workspace/didChangeConfiguration` params: `{settings: {adaptrack: {...}}}`. */
export function toDidChangeConfigurationParams(
  settings: Partial<ExtensionSettings>,
  context: PathContext = {},
): { settings: { [SECTION]: ServerSettings } } {
  return { settings: { [SECTION]: toServerSettings(settings, context) } };
}

/** Names of the settings (client and server) that differ between two readings. */
export function changedSettings(before: ExtensionSettings, after: ExtensionSettings): string[] {
  const names = [...SERVER_SETTING_NAMES, ...CLIENT_SETTING_NAMES];
  return names.filter((name) => JSON.stringify(before[name]) !== JSON.stringify(after[name]));
}

/** What a settings change asks of the client. */
export type SettingsReaction = 'none' | 'start' | 'stop' | 'restart' | 'notify';

export function reactionToChange(before: ExtensionSettings, after: ExtensionSettings): SettingsReaction {
  const changed = changedSettings(before, after);
  if (changed.length === 0) {
    return 'none';
  }
  if (changed.includes('enable')) {
    return after.enable ? 'start' : 'stop';
  }
  if (!after.enable) {
    return 'none';
  }
  if (changed.some((name) => (RESTART_SETTING_NAMES as readonly string[]).includes(name))) {
    return 'restart';
  }
  if (changed.includes('apiKeyEnv')) {
    return 'restart'; // a key from secret storage is handed over in the process environment
  }
  return 'notify';
}

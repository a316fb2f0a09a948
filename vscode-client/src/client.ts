/**
 * Language client lifecycle inside VS Code.
 *
 * Owns: finding the Python extension's interpreter, creating the `LanguageClient` from
 * the launch description (`server.ts`) and settings (`settings.ts`), start / stop /
 * restart, forwarding settings changes as `workspace/didChangeConfiguration`, and
 * feeding `adaptrack/status` and model-loading progress into the status model.
 */
import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification,
  Executable,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  State,
} from 'vscode-languageclient/node';
import { PythonExtension } from '@vscode/python-extension';

import { bundledWheel, envState, hasServer, privateEnv, SetupError, setUp } from './bootstrap';
import { API_KEY_SECRET, apiKeyEnvironment, buildServerLaunch, describeLaunch, FALLBACK_INTERPRETER, resolveInterpreter, ServerLaunch } from './server';
import { pipeServerStderr } from './serverLog';
import { ExtensionSettings, PathContext, readSettings, SECTION, toDidChangeConfigurationParams, toInitializationOptions } from './settings';
import { StatusModel, STATUS_NOTIFICATION } from './status';

const PYTHON_EXTENSION_ID = 'ms-python.python';

export function currentPathContext(): PathContext {
  return { workspaceFolder: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath, workspaceTrusted: vscode.workspace.isTrusted };
}

export function currentSettings(): ExtensionSettings {
  return readSettings(vscode.workspace.getConfiguration(SECTION));
}

/** The Python extension's active interpreter, or undefined when it is not installed or has none. */
export async function pythonExtensionInterpreter(log: vscode.LogOutputChannel): Promise<string | undefined> {
  if (!vscode.extensions.getExtension(PYTHON_EXTENSION_ID)) {
    return undefined;
  }
  try {
    const api = await PythonExtension.api();
    const resource = vscode.workspace.workspaceFolders?.[0]?.uri;
    const environment = await api.environments.resolveEnvironment(api.environments.getActiveEnvironmentPath(resource));
    return environment?.executable.uri?.fsPath;
  } catch (error) {
    log.warn(`could not ask the Python extension for its interpreter: ${String(error)}`);
    return undefined;
  }
}

/** Subscribe to the Python extension's interpreter changes (no-op without that extension). */
export async function onPythonInterpreterChange(listener: () => void): Promise<vscode.Disposable | undefined> {
  if (!vscode.extensions.getExtension(PYTHON_EXTENSION_ID)) {
    return undefined;
  }
  try {
    const api = await PythonExtension.api();
    return api.environments.onDidChangeActiveEnvironmentPath(() => listener());
  } catch {
    return undefined;
  }
}

/** Where the extension may set up the server's private environment (`bootstrap.ts`). */
export interface BootstrapPlace {
  /** the extension's global storage folder */
  storageDir: string;
  /** the extension's own folder (holds `server/*.whl` in a packaged `.vsix`) */
  extensionDir: string;
}

/** What the private environment gives `doStart`: an interpreter, none (use the usual
 * ones), or `wait` (setup offered, running or failed: the status says which). */
type PrivateChoice = { interpreter?: string } | 'wait';

export class ServerManager implements vscode.Disposable {
  private client: LanguageClient | undefined;
  /** serialises start/stop/restart so that commands fired in a row do not interleave */
  private queue: Promise<unknown> = Promise.resolve();
  /** the setup was offered (or failed) in this window: not offered again until asked for */
  private setupOffered = false;
  /** upgrading the private environment failed in this window: not tried again until asked for */
  private upgradeFailed = false;

  constructor(
    private readonly log: vscode.LogOutputChannel,
    private readonly status: StatusModel,
    /** where the inference server's API key is kept (`adaptrack: Set Server API Key`) */
    private readonly secrets?: vscode.SecretStorage,
    private readonly bootstrap?: BootstrapPlace,
  ) {}

  get languageClient(): LanguageClient | undefined {
    return this.client;
  }

  get launch(): ServerLaunch | undefined {
    return this.lastLaunch;
  }

  private lastLaunch: ServerLaunch | undefined;

  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.doStop());
  }

  restart(): Promise<void> {
    return this.enqueue(async () => {
      await this.doStop();
      await this.doStart();
    });
  }

  /** Send the current server settings to a running server. */
  async notifySettings(settings: ExtensionSettings): Promise<void> {
    if (!this.client || !this.client.isRunning()) {
      return;
    }
    try {
      const params = toDidChangeConfigurationParams(settings, currentPathContext());
      await this.client.sendNotification(DidChangeConfigurationNotification.type, params);
    } catch (error) {
      this.log.error(`could not send the settings to the server: ${String(error)}`);
      this.status.set('error', `invalid setting: ${String(error)}`);
    }
  }

  private enqueue(task: () => Promise<void>): Promise<void> {
    const next = this.queue.then(task, task);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async doStart(): Promise<void> {
    if (this.client) {
      return;
    }
    const settings = currentSettings();
    if (!settings.enable) {
      this.status.set('disabled');
      return;
    }
    this.status.set('starting');
    let client: LanguageClient;
    try {
      const pathContext = currentPathContext();
      // ask the Python extension only when the setting does not name an interpreter
      const fromSetting =
        resolveInterpreter({ serverInterpreter: settings.serverInterpreter, serverArgs: [], pathContext }).source === 'setting';
      const fromExtension = fromSetting ? undefined : await pythonExtensionInterpreter(this.log);
      const privateChoice: PrivateChoice = fromSetting ? {} : await this.privateInterpreter(fromExtension);
      if (privateChoice === 'wait') {
        return;
      }
      const apiKey = await this.secrets?.get(API_KEY_SECRET);
      const launch = buildServerLaunch({
        serverInterpreter: settings.serverInterpreter,
        serverArgs: settings.serverArgs,
        privateInterpreter: privateChoice.interpreter,
        pythonExtensionInterpreter: fromExtension,
        pathContext,
        // the key reaches the server only through its environment; the log names the variable, never the key
        secretEnv: apiKeyEnvironment(settings.apiKeyEnv, apiKey),
      });
      if (apiKey) {
        this.log.info(`the inference server's API key from secret storage is passed in ${settings.apiKeyEnv}`);
      }
      this.lastLaunch = launch;
      this.log.info(`starting server: ${describeLaunch(launch)}`);
      const executable: Executable = {
        command: launch.command,
        args: launch.args,
        options: { cwd: launch.cwd, env: launch.env },
      };
      const clientOptions: LanguageClientOptions = {
        documentSelector: [
          { scheme: 'file', language: 'python' },
          { scheme: 'untitled', language: 'python' },
        ],
        initializationOptions: toInitializationOptions(settings, pathContext),
        outputChannel: this.log,
        revealOutputChannelOn: RevealOutputChannelOn.Never,
        // stderr at the level the server logged each line at (not everything as [error])
        stdioOptions: {
          stdout: (input, channel) => pipeServerStderr(input, channel),
          stderr: (input, channel) => pipeServerStderr(input, channel),
        },
        middleware: {
          handleWorkDoneProgress: (token, params, next) => {
            this.status.applyProgress(token, params);
            next(token, params);
          },
        },
      };
      client = new LanguageClient(SECTION, 'adaptrack', executable, clientOptions);
    } catch (error) {
      this.log.error(`cannot start the server: ${String(error)}`);
      this.status.set('error', String(error));
      return;
    }
    client.onDidChangeState((event) => {
      if (event.newState === State.Starting) {
        this.status.set('starting');
      } else if (event.newState === State.Stopped && this.status.state !== 'error') {
        this.status.set('stopped');
      }
    });
    client.onNotification(STATUS_NOTIFICATION, (params: unknown) => {
      // the ghost text asked for while the API index computed was empty: ask again at "ready"
      this.status.applyNotification(params, () => {
        void vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
      });
      const message = (params as { message?: string } | null)?.message ?? '';
      this.log.info(`server status: ${JSON.stringify(params)}`);
      if ((params as { state?: string } | null)?.state === 'error') {
        void vscode.window.showErrorMessage(`adaptrack: ${message}`, 'Show Logs').then((choice) => {
          if (choice) {
            this.log.show();
          }
        });
      }
    });
    this.client = client;
    try {
      await client.start();
      if (this.status.state === 'starting') {
        // the server reports its own state right after `initialized`; until then it is loading
        this.status.set('loading');
      }
    } catch (error) {
      this.log.error(`the server did not start: ${String(error)}`);
      this.status.set('error', `the server did not start (${this.lastLaunch?.command ?? '?'}): ${String(error)}`);
      this.client = undefined;
      await client.dispose().catch(() => undefined);
    }
  }

  /**
   * The private environment's interpreter when it is set up and current (an outdated one,
   * from an earlier extension version, is upgraded first); nothing when there is no wheel
   * to set it up from or the usual interpreter has the server; else `wait`, after offering
   * the setup once (one notification, one click) or saying what is broken and how to fix it.
   */
  private async privateInterpreter(fromExtension: string | undefined): Promise<PrivateChoice> {
    const wheel = this.bootstrap && bundledWheel(this.bootstrap.extensionDir);
    if (!this.bootstrap || !wheel) {
      return {};
    }
    const env = privateEnv(this.bootstrap.storageDir);
    const state = await envState(env, wheel);
    if (state === 'current') {
      return { interpreter: env.python };
    }
    if (state === 'outdated') {
      // a failed upgrade is said once; the server already installed keeps running meanwhile
      if (!this.upgradeFailed) {
        this.log.info(`the server's environment ${env.dir} was set up from another wheel: upgrading it to ${wheel}`);
        this.upgradeFailed = !(await this.runSetUp(wheel, fromExtension, true));
      }
      return { interpreter: env.python };
    }
    if (state === 'broken') {
      const message = `the server's environment ${env.dir} is broken (its Python does not import adaptrack_lsp: deleted files, or its base Python was removed): recreate it`;
      this.log.error(message);
      this.status.set('error', message);
      void vscode.window.showErrorMessage(`adaptrack: ${message}.`, 'Recreate', 'Show Logs').then((choice) => {
        if (choice === 'Recreate') {
          void this.setUpServer();
        } else if (choice) {
          this.log.show();
        }
      });
      return 'wait';
    }
    const candidate = fromExtension ?? FALLBACK_INTERPRETER;
    if (await hasServer(candidate)) {
      return {};
    }
    const missing = `no interpreter with the adaptrack-lsp server (${candidate} has none): run "adaptrack: Set Up Server" or set adaptrack.serverInterpreter`;
    this.log.info(missing);
    this.status.set('error', missing);
    if (!this.setupOffered) {
      this.setupOffered = true;
      void vscode.window
        .showInformationMessage(
          'adaptrack: set up its language server in a private environment? (from the server wheel in the extension; pip downloads its dependencies, about 150 MB, no torch)',
          'Set Up',
          'Not Now',
        )
        .then((choice) => {
          if (choice === 'Set Up') {
            void this.setUpServer();
          } else {
            this.log.info('server setup declined: run "adaptrack: Set Up Server" to set it up later');
          }
        });
    }
    return 'wait';
  }

  /** Create (or recreate) the private environment, then start the server from it. */
  setUpServer(): Promise<void> {
    return this.enqueue(async () => {
      const wheel = this.bootstrap && bundledWheel(this.bootstrap.extensionDir);
      if (!wheel) {
        const message = 'this build of the extension carries no server wheel: pip install adaptrack-lsp into a Python >= 3.10 and set adaptrack.serverInterpreter to it';
        this.status.set('error', message);
        void vscode.window.showErrorMessage(`adaptrack: ${message}`);
        return;
      }
      await this.doStop();
      this.upgradeFailed = false;
      if (await this.runSetUp(wheel, await pythonExtensionInterpreter(this.log), false)) {
        await this.doStart();
      }
    });
  }

  /** One setup run with its progress in the status bar and the log; false (and one
   * message naming the fix) when it fails.  Never retried by itself. */
  private async runSetUp(wheel: string, fromExtension: string | undefined, upgrade: boolean): Promise<boolean> {
    const env = privateEnv(this.bootstrap!.storageDir);
    this.setupOffered = true;
    this.status.set('installing', upgrade ? 'upgrading' : 'creating the environment');
    const started = Date.now();
    try {
      await setUp(
        env,
        wheel,
        [fromExtension],
        (message) => {
          this.log.info(`setup: ${message}`);
          this.status.set('installing', message);
        },
        (line) => {
          this.log.info(`setup: ${line}`);
          const collecting = /^(Collecting|Downloading|Installing collected packages|Successfully installed)\s*(.*)$/.exec(line.trim());
          if (collecting) {
            this.status.set('installing', `${collecting[1]} ${collecting[2]}`.trim().slice(0, 80));
          }
        },
        { upgrade },
      );
    } catch (error) {
      const message = error instanceof SetupError ? error.message : `setting up the server failed: ${String(error)}`;
      this.log.error(message);
      this.status.set('error', message);
      void vscode.window.showErrorMessage(`adaptrack: ${message}`, 'Show Logs').then((choice) => {
        if (choice) {
          this.log.show();
        }
      });
      return false;
    }
    this.log.info(`setup: the server is installed in ${env.dir} (${((Date.now() - started) / 1000).toFixed(0)} s)`);
    this.status.set('starting');
    return true;
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (!client) {
      return;
    }
    try {
      if (client.isRunning()) {
        await client.stop(5000);
      }
    } catch (error) {
      this.log.warn(`stopping the server: ${String(error)}`);
    } finally {
      await client.dispose().catch(() => undefined);
    }
    // the settings as they are now: a stop caused by turning `adaptrack.enable` off is
    // 'disabled' (the copy taken at start still says enabled)
    this.status.set(currentSettings().enable === false ? 'disabled' : 'stopped');
  }

  dispose(): void {
    void this.stop();
  }
}

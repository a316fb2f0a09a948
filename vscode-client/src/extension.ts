/**
 * Extension entry point.
 *
 * Owns: activation, the output channel, the status bar item, the commands
 * (`adaptrack.restart`, `adaptrack.showLogs`, `adaptrack.toggle`, `adaptrack.setUpServer`
 * (the server's private environment, `bootstrap.ts`), and
 * `adaptrack.setApiKey` / `adaptrack.clearApiKey`: the inference server's API key in
 * VS Code's secret storage, handed to the server in its environment) and reacting to
 * settings changes (restart for the launch settings, start/stop for `enable`,
 * didChangeConfiguration for the server's settings).
 */
import * as vscode from 'vscode';

import { currentSettings, onPythonInterpreterChange, ServerManager } from './client';
import { API_KEY_SECRET } from './server';
import { ExtensionSettings, reactionToChange, SECTION } from './settings';
import { StatusBar, StatusModel } from './status';

export const COMMANDS = {
  restart: 'adaptrack.restart',
  showLogs: 'adaptrack.showLogs',
  toggle: 'adaptrack.toggle',
  setApiKey: 'adaptrack.setApiKey',
  clearApiKey: 'adaptrack.clearApiKey',
  setUpServer: 'adaptrack.setUpServer',
} as const;

/** What `activate` returns: used by the extension-host tests and by other extensions. */
export interface AdaptrackApi {
  readonly status: StatusModel;
  readonly server: ServerManager;
}

let manager: ServerManager | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<AdaptrackApi> {
  const log = vscode.window.createOutputChannel('adaptrack', { log: true });
  const status = new StatusModel();
  manager = new ServerManager(log, status, context.secrets, {
    storageDir: context.globalStorageUri.fsPath,
    extensionDir: context.extensionUri.fsPath,
  });
  const server = manager;
  context.subscriptions.push(log, new StatusBar(vscode, status, COMMANDS.showLogs), server);

  context.subscriptions.push(
    vscode.commands.registerCommand(COMMANDS.restart, async () => {
      log.info('restart requested');
      await server.restart();
    }),
    vscode.commands.registerCommand(COMMANDS.showLogs, () => log.show()),
    vscode.commands.registerCommand(COMMANDS.setUpServer, async () => {
      log.info('server setup requested');
      await server.setUpServer();
    }),
    vscode.commands.registerCommand(COMMANDS.setApiKey, async () => {
      const key = await vscode.window.showInputBox({
        title: 'adaptrack: API key of the inference server',
        prompt: `Kept in VS Code's secret storage and passed to the language server in ${currentSettings().apiKeyEnv}; never written to settings or logs.`,
        password: true,
        ignoreFocusOut: true,
      });
      if (!key) {
        return;
      }
      await context.secrets.store(API_KEY_SECRET, key);
      log.info('the inference server API key was stored in secret storage: restarting the server');
      await server.restart();
    }),
    vscode.commands.registerCommand(COMMANDS.clearApiKey, async () => {
      await context.secrets.delete(API_KEY_SECRET);
      log.info('the inference server API key was removed from secret storage: restarting the server');
      await server.restart();
    }),
    vscode.commands.registerCommand(COMMANDS.toggle, async () => {
      const config = vscode.workspace.getConfiguration(SECTION);
      const enabled = config.get<boolean>('enable', true);
      // the configuration listener below starts or stops the server
      await config.update('enable', !enabled, vscode.ConfigurationTarget.Global);
      void vscode.window.setStatusBarMessage(`adaptrack completions ${enabled ? 'disabled' : 'enabled'}`, 3000);
    }),
  );

  let settings: ExtensionSettings = currentSettings();
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!event.affectsConfiguration(SECTION)) {
        return;
      }
      const before = settings;
      settings = currentSettings();
      const reaction = reactionToChange(before, settings);
      log.info(`settings changed: ${reaction}`);
      switch (reaction) {
        case 'start':
          await server.start();
          break;
        case 'stop':
          await server.stop();
          break;
        case 'restart':
          await server.restart();
          break;
        case 'notify':
          await server.notifySettings(settings);
          break;
        case 'none':
          break;
      }
    }),
  );

  // the server uses the workspace's environment only once the workspace is trusted
  context.subscriptions.push(
    vscode.workspace.onDidGrantWorkspaceTrust(async () => {
      log.info('workspace trusted: telling the server');
      await server.notifySettings(currentSettings());
    }),
  );

  const interpreterListener = await onPythonInterpreterChange(() => {
    if (!currentSettings().serverInterpreter) {
      log.info('the Python extension changed its interpreter: restarting the server');
      void server.restart();
    }
  });
  if (interpreterListener) {
    context.subscriptions.push(interpreterListener);
  }

  await server.start();
  return { status, server };
}

export async function deactivate(): Promise<void> {
  await manager?.stop();
  manager = undefined;
}

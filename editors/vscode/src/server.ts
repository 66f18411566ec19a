// Finding the agent-ls server and building its environment and settings.
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';

export interface ServerCommand {
  command: string;
  args: string[];
  /** Where the command came from, for messages. */
  source: string;
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

function onPath(name: string, envPath: string | undefined): string | undefined {
  const exts = process.platform === 'win32' ? ['.exe', '.cmd', '.bat', ''] : [''];
  for (const dir of (envPath ?? '').split(path.delimiter)) {
    if (!dir) {
      continue;
    }
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext);
      if (isExecutable(candidate)) {
        return candidate;
      }
    }
  }
  return undefined;
}

function expand(value: string, folder: string | undefined): string {
  return value
    .replace(/\$\{workspaceFolder\}/g, folder ?? '')
    .replace(/^~(?=$|\/|\\)/, process.env.HOME ?? '~');
}

/**
 * The command that starts `agent-ls serve`: the `agentLs.serverCommand` setting, else
 * `agentLs.serverPath`, else the workspace's virtualenv, else `agent-ls` on PATH.
 */
export function findServer(): ServerCommand | undefined {
  const cfg = vscode.workspace.getConfiguration('agentLs');
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  const full = (cfg.get<string[]>('serverCommand') ?? []).filter((s) => s.length > 0);
  if (full.length > 0) {
    const [command, ...args] = full.map((s) => expand(s, folder));
    return { command, args, source: 'agentLs.serverCommand' };
  }
  const configured = (cfg.get<string>('serverPath') ?? '').trim();
  if (configured) {
    return { command: expand(configured, folder), args: ['serve'], source: 'agentLs.serverPath' };
  }
  for (const ws of vscode.workspace.workspaceFolders ?? []) {
    for (const venv of ['.venv', 'venv', 'env']) {
      const bin = process.platform === 'win32'
        ? path.join(ws.uri.fsPath, venv, 'Scripts', 'agent-ls.exe')
        : path.join(ws.uri.fsPath, venv, 'bin', 'agent-ls');
      if (isExecutable(bin)) {
        return { command: bin, args: ['serve'], source: `${venv} in ${ws.name}` };
      }
    }
  }
  const found = onPath('agent-ls', process.env.PATH);
  if (found) {
    return { command: found, args: ['serve'], source: 'PATH' };
  }
  return undefined;
}

/** The `agent` settings object the server reads (initializationOptions / configuration). */
export function serverSettings(): Record<string, unknown> {
  const cfg = vscode.workspace.getConfiguration('agentLs');
  const settings: Record<string, unknown> = { ...(cfg.get<Record<string, unknown>>('serverSettings') ?? {}) };
  const model = (cfg.get<string>('model') ?? '').trim();
  if (model) {
    settings.model = model;
  }
  settings.mode = cfg.get<string>('mode') ?? 'default';
  const permissions = cfg.get<Record<string, string[]>>('permissions');
  if (permissions) {
    settings.permissions = {
      allow: permissions.allow ?? [],
      ask: permissions.ask ?? [],
      deny: permissions.deny ?? [],
    };
  }
  settings.followAgent = cfg.get<boolean>('followAgent') ?? false;
  const maxCost = cfg.get<number | null>('maxCostUsd');
  if (typeof maxCost === 'number' && maxCost > 0) {
    settings.maxCostUsd = maxCost;
  }
  return settings;
}

export const SECRET_KEYS: Record<string, string> = {
  ANTHROPIC_API_KEY: 'agentLs.anthropicApiKey',
  OPENAI_API_KEY: 'agentLs.openaiApiKey',
};

/**
 * The server's environment: ours, the `agentLs.env` setting, and API keys from the secret
 * storage when the environment has none. Keys never come from settings.
 */
export async function serverEnv(secrets: vscode.SecretStorage): Promise<NodeJS.ProcessEnv> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  const extra = vscode.workspace.getConfiguration('agentLs').get<Record<string, string>>('env') ?? {};
  for (const [k, v] of Object.entries(extra)) {
    if (k in SECRET_KEYS) {
      continue; // keys belong in the secret storage, not in settings
    }
    env[k] = String(v);
  }
  for (const [name, secret] of Object.entries(SECRET_KEYS)) {
    if (!env[name]) {
      const stored = await secrets.get(secret);
      if (stored) {
        env[name] = stored;
      }
    }
  }
  return env;
}

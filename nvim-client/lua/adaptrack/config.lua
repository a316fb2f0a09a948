--- Options of the Neovim client and the server settings it sends.
---
--- Owns: default options, validation with errors that name the bad option, and the
--- mapping of `settings` (snake_case or camelCase keys) to the server's camelCase
--- settings object (sent as `initializationOptions` and as
--- `workspace/didChangeConfiguration` `{settings = {adaptrack = ...}}`).
local M = {}

--- Server settings and their types (protocol contract; see adaptrack_lsp/config.py).
M.server_settings = {
  model = 'string',
  device = 'string',
  dtype = 'string',
  kvCache = 'string',
  threads = 'number',
  gpuLayers = 'number',
  decoder = 'string',
  listDecoder = 'string',
  temperature = 'number',
  numSamples = 'number',
  maxNewTokens = 'number',
  contextTokens = 'number',
  maxBacktrackDistance = 'number',
  topPValidity = 'number',
  pythonPath = 'string',
  apiSnapshot = 'string',
  -- a list of requirement specifiers, e.g. { 'numpy>=1.24,<3' }
  versionTargets = 'table',
  runtimeIntrospection = 'boolean',
  keywordArguments = 'boolean',
  timeoutMs = 'number',
  multiline = 'boolean',
  -- version diagnostics: 'off', 'hint', 'warning' (default) or 'error'
  diagnostics = 'string',
  avoidDeprecated = 'boolean',
  syntaxConstraint = 'boolean',
  trustRemoteCode = 'boolean',
  backend = 'string',
  endpoint = 'string',
  tokenizer = 'string',
  serverModel = 'string',
  -- the name of the environment variable with the inference server's API key (never the key)
  apiKeyEnv = 'string',
  serverTopLogprobs = 'number',
  serverLookahead = 'number',
  serverTimeoutMs = 'number',
  -- true: the project's .venv/venv may be used and its modules imported (default false;
  -- set it in your own config, for projects you trust)
  trustedWorkspace = 'boolean',
}

M.defaults = {
  -- interpreter that runs the server: `<python> -m adaptrack_lsp serve` (adaptrack-lsp
  -- must be installed in it; the analysed project environment is the separate
  -- `pythonPath` server setting).  nil: the environment :AdaptrackInstall made, else the
  -- `adaptrack-lsp` command on PATH (pipx, uv tool), else python3
  python = nil,
  -- what :AdaptrackInstall installs: nil = this plugin's repository (it holds the
  -- server's sources), else adaptrack-lsp from the package index; or a wheel / folder
  install_source = nil,
  -- full command; overrides `python` when given
  cmd = nil,
  -- extra arguments after `serve` (for example { '-v', '--log-file', '/tmp/adaptrack.log' })
  server_args = {},
  -- server settings (camelCase or snake_case keys), see the README
  settings = {},
  filetypes = { 'python' },
  root_markers = { 'pyproject.toml', 'setup.py', 'setup.cfg', 'requirements.txt', '.git' },
  ghost_text = {
    enabled = true,
    -- request suggestions while typing (false: only on require('adaptrack').suggest())
    auto_trigger = true,
    debounce_ms = 150,
    -- insert-mode key that accepts the suggestion (falls back to the key itself); false: no mapping
    accept_key = '<Tab>',
    -- insert-mode key that dismisses the suggestion; false: no mapping
    dismiss_key = '<C-]>',
    hl_group = 'Comment',
  },
  completion = {
    -- set 'completefunc' (<C-x><C-u>) to adaptrack's list completion
    completefunc = true,
    -- set 'omnifunc' (<C-x><C-o>) to vim.lsp.omnifunc
    omnifunc = false,
    timeout_ms = 10000,
  },
  -- use Neovim's own vim.lsp.inline_completion (0.12+) instead of this plugin's ghost text:
  -- 'auto' = when available, true = require it, false = never
  native_inline_completion = 'auto',
}

local function camel_case(name)
  return (name:gsub('_(%l)', function(letter)
    return letter:upper()
  end))
end

--- The server settings object: keys camelCase, unknown keys and wrong types rejected
--- with an error naming the key.  `vim.NIL` passes through (null = server default).
function M.server_settings_from(settings)
  if settings == nil then
    return vim.empty_dict()
  end
  if type(settings) ~= 'table' then
    error(string.format('adaptrack: settings must be a table, got %s', type(settings)), 0)
  end
  local result = {}
  for key, value in pairs(settings) do
    if type(key) ~= 'string' then
      error(string.format('adaptrack: settings keys must be strings, got %s', vim.inspect(key)), 0)
    end
    local name = camel_case(key)
    local expected = M.server_settings[name]
    if expected == nil then
      local known = vim.tbl_keys(M.server_settings)
      table.sort(known)
      error(string.format('adaptrack: unknown setting %q (known: %s)', key, table.concat(known, ', ')), 0)
    end
    if value ~= vim.NIL and type(value) ~= expected then
      error(string.format('adaptrack: setting %q must be a %s, got %s', key, expected, vim.inspect(value)), 0)
    end
    if result[name] ~= nil then
      error(string.format('adaptrack: setting %q is given twice (snake_case and camelCase)', name), 0)
    end
    result[name] = value
  end
  if next(result) == nil then
    return vim.empty_dict()
  end
  return result
end

local function check_type(path, value, expected)
  local ok = false
  for _, kind in ipairs(vim.split(expected, '|', { plain = true })) do
    if type(value) == kind then
      ok = true
    end
  end
  if not ok then
    error(string.format('adaptrack: option %s must be %s, got %s', path, expected, vim.inspect(value)), 0)
  end
end

local option_types = {
  python = 'string',
  install_source = 'string',
  cmd = 'table|nil',
  server_args = 'table',
  settings = 'table',
  filetypes = 'table',
  root_markers = 'table',
  ghost_text = 'table',
  completion = 'table',
  native_inline_completion = 'boolean|string',
}
local ghost_types = {
  enabled = 'boolean',
  auto_trigger = 'boolean',
  debounce_ms = 'number',
  accept_key = 'string|boolean',
  dismiss_key = 'string|boolean',
  hl_group = 'string',
}
local completion_types = { completefunc = 'boolean', omnifunc = 'boolean', timeout_ms = 'number' }

local function check_table(path, user, types)
  for key, value in pairs(user) do
    local expected = types[key]
    if expected == nil then
      error(string.format('adaptrack: unknown option %s%s', path, key), 0)
    end
    check_type(path .. key, value, expected)
  end
end

--- Merge user options over the defaults; raise on unknown options or wrong types.
function M.resolve(user)
  user = user or {}
  check_type('setup()', user, 'table')
  check_table('', user, option_types)
  check_table('ghost_text.', user.ghost_text or {}, ghost_types)
  check_table('completion.', user.completion or {}, completion_types)
  local native = user.native_inline_completion
  if type(native) == 'string' and native ~= 'auto' then
    error(string.format("adaptrack: option native_inline_completion must be true, false or 'auto', got %q", native), 0)
  end
  local options = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), user)
  -- lists replace, not merge
  for _, key in ipairs({ 'server_args', 'filetypes', 'root_markers' }) do
    if user[key] ~= nil then
      options[key] = user[key]
    end
  end
  options.settings = user.settings or {}
  options.server_settings = M.server_settings_from(options.settings)
  if options.ghost_text.debounce_ms < 0 then
    error('adaptrack: option ghost_text.debounce_ms must be >= 0', 0)
  end
  return options
end

--- The server's working directory: this plugin's own folder, never the project.
--- `python -m` puts the working directory first on `sys.path`, so a project's
--- `queue.py` or `token.py` would run inside the server.
function M.server_cwd()
  local source = debug.getinfo(1, 'S').source:sub(2)
  return vim.fn.fnamemodify(source, ':p:h')
end

--- The server command and where it came from ('cmd' | 'python' | 'installed' | 'PATH' |
--- 'fallback'): `cmd`, else `<python> -m adaptrack_lsp serve <server_args>` with the
--- `python` option, the environment :AdaptrackInstall made, the `adaptrack-lsp` command on
--- PATH (`adaptrack-lsp serve ...`), or python3.
function M.server_command(options)
  if options.cmd then
    return vim.deepcopy(options.cmd), 'cmd'
  end
  local python, source = options.python, 'python'
  if python == '' then
    error('adaptrack: option python must name an interpreter (or give cmd)', 0)
  end
  if python == nil then
    local install = require('adaptrack.install')
    if install.installed() then
      python, source = install.env_python(), 'installed'
    elseif vim.fn.executable('adaptrack-lsp') == 1 then
      local command = { vim.fn.exepath('adaptrack-lsp'), 'serve' }
      vim.list_extend(command, options.server_args)
      return command, 'PATH'
    else
      python, source = 'python3', 'fallback'
    end
  end
  local command = { vim.fn.expand(python), '-m', 'adaptrack_lsp', 'serve' }
  vim.list_extend(command, options.server_args)
  return command, source
end

return M

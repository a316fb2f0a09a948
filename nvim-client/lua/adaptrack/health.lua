--- `:checkhealth adaptrack`: the server command and where it came from, then what the
--- server's own `doctor` finds (interpreter and packages, extras, the project
--- interpreter, trust, the model and its state, the cache and its API index), each
--- problem with its fix, then the running server's state.  Neovim 0.7 - 0.9 report
--- through `require('health')`, 0.10+ through `vim.health`.
local config = require('adaptrack.config')
local install = require('adaptrack.install')
local status = require('adaptrack.status')

local M = {}

local health = vim.health or require('health')
local start = health.start or health.report_start
local ok = health.ok or health.report_ok
local info = health.info or health.report_info
local warn = health.warn or health.report_warn
local report_error = health.error or health.report_error

local SOURCES = {
  cmd = 'the cmd option',
  python = 'the python option',
  installed = 'the environment :AdaptrackInstall made',
  PATH = 'the adaptrack-lsp command on PATH',
  fallback = 'python3 (no python option, no :AdaptrackInstall environment, no adaptrack-lsp on PATH)',
}
local NO_SERVER_FIX = { ':AdaptrackInstall (a private environment under ' .. install.env_dir() .. ')', 'or: pipx install adaptrack-lsp', 'or: set the python option to an interpreter with adaptrack-lsp installed' }

--- The doctor's command line for `command` (the serve command) and the settings.
function M.doctor_command(command, settings, root)
  local doctor = {}
  for _, part in ipairs(command) do
    if part == 'serve' then
      break
    end
    table.insert(doctor, part)
  end
  vim.list_extend(doctor, { 'doctor', '--json' })
  local flags = { model = '--model', backend = '--backend', endpoint = '--endpoint', tokenizer = '--tokenizer', pythonPath = '--python', apiSnapshot = '--snapshot' }
  for key, flag in pairs(flags) do
    local value = settings[key]
    if type(value) == 'string' and value ~= '' then
      vim.list_extend(doctor, { flag, value })
    end
  end
  if settings.trustedWorkspace == true then
    table.insert(doctor, '--trust-workspace')
  end
  if root then
    vim.list_extend(doctor, { '--workspace', root })
  end
  return doctor
end

local function report(check)
  local text = check.name .. ': ' .. check.detail
  local fix = (check.fix and check.fix ~= '') and { check.fix } or nil
  if check.level == 'ok' then
    ok(text)
  elseif check.level == 'info' then
    info(text .. (fix and (' (' .. check.fix .. ')') or ''))
  elseif check.level == 'warn' then
    warn(text, fix)
  else
    report_error(text, fix)
  end
end

function M.check()
  start('adaptrack: server')
  local adaptrack = require('adaptrack')
  local options = adaptrack.options
  if not options then
    warn("setup() has not run: the defaults are checked", { "call require('adaptrack').setup({...}) in your config (docs/editors.md)" })
    options = config.resolve({})
  end
  local found, command, source = pcall(config.server_command, options)
  if not found then
    report_error(tostring(command))
    return
  end
  local shown = table.concat(command, ' ')
  if vim.fn.executable(command[1]) ~= 1 then
    report_error(string.format('%s: %s is not an executable (from %s)', shown, command[1], SOURCES[source]), NO_SERVER_FIX)
    return
  end
  local buf = vim.api.nvim_get_current_buf()
  local root = vim.bo[buf].filetype ~= '' and vim.tbl_contains(options.filetypes, vim.bo[buf].filetype) and adaptrack.root_dir(buf) or nil
  local doctor = M.doctor_command(command, options.server_settings or {}, root)
  local output = vim.fn.system(doctor)
  local parsed_ok, parsed = pcall(vim.fn.json_decode, output:match('%b{}') or '')
  if not parsed_ok or type(parsed) ~= 'table' or type(parsed.checks) ~= 'table' then
    local first = vim.split(vim.trim(output), '\n')
    report_error(string.format('%s does not run the server (from %s): %s', shown, SOURCES[source], first[#first] or 'no output'), NO_SERVER_FIX)
    return
  end
  ok(string.format('%s (from %s)', shown, SOURCES[source]))
  for _, check in ipairs(parsed.checks) do
    report(check)
  end

  start('adaptrack: running server')
  local state, message = status.state, status.message
  local text = state .. (message ~= '' and (': ' .. message) or '')
  if state == 'ready' then
    ok(text)
  elseif state == 'degraded' then
    warn(text, { 'see the message; :AdaptrackRestart after fixing the settings' })
  elseif state == 'error' then
    report_error(text, { ':LspLog for the server log; :AdaptrackRestart after the fix' })
  elseif state == 'stopped' and #require('adaptrack.compat').clients(adaptrack.NAME) == 0 then
    info('not started: it starts with the first Python buffer')
  else
    info(text .. (state == 'indexing' and ' (reading the installed APIs the completion needs; the API index)' or ''))
  end
end

return M

--- The server's private environment for Neovim users without one: `:AdaptrackInstall`.
---
--- Owns: where it lives (`stdpath('data')/adaptrack/server-env`), what it installs (the
--- `install_source` option, else this plugin's own repository when it has a
--- pyproject.toml, else `adaptrack-lsp` from the package index), finding a base Python
--- >= 3.10, running venv and pip as jobs with their output in the status and in
--- `stdpath('cache')/adaptrack-install.log`, and one message naming the fix and the exact
--- manual command when a step fails (no Python 3.10, storage not writable, offline, pip
--- failing).  A failed install is never retried by itself.
local status = require('adaptrack.status')

local M = {}

M.MIN_PYTHON = { 3, 10 }
M.CANDIDATES = { 'python3', 'python3.13', 'python3.12', 'python3.11', 'python3.10', 'python' }

local running = false

function M.env_dir()
  return vim.fn.stdpath('data') .. '/adaptrack/server-env'
end

function M.env_python()
  return M.env_dir() .. '/bin/python'
end

local function stamp_path()
  return M.env_dir() .. '/adaptrack-installed.txt'
end

function M.log_path()
  return vim.fn.stdpath('cache') .. '/adaptrack-install.log'
end

--- The environment is there and a finished install wrote its stamp.
function M.installed()
  return vim.fn.executable(M.env_python()) == 1 and vim.fn.filereadable(stamp_path()) == 1
end

--- This plugin's repository (the folder above nvim-client/), when it holds the server's sources.
function M.repository()
  local source = debug.getinfo(1, 'S').source:sub(2)
  local root = vim.fn.fnamemodify(source, ':p:h:h:h:h')
  if vim.fn.filereadable(root .. '/pyproject.toml') == 1 then
    return root
  end
  return nil
end

function M.source(options)
  return (options and options.install_source) or M.repository() or 'adaptrack-lsp'
end

--- (major, minor) of `python`, or nil when it does not run.
function M.python_version(python)
  if vim.fn.executable(python) ~= 1 then
    return nil
  end
  local output = vim.fn.system({ python, '-c', 'import sys; print(sys.version_info[0], sys.version_info[1])' })
  if vim.v.shell_error ~= 0 then
    return nil
  end
  local major, minor = output:match('(%d+) (%d+)')
  if not major then
    return nil
  end
  return { tonumber(major), tonumber(minor) }
end

--- The first candidate that is Python >= 3.10; also the ones passed over as too old.
function M.base_python(first)
  local too_old = {}
  local seen = {}
  local candidates = vim.list_extend(first and { first } or {}, vim.deepcopy(M.CANDIDATES))
  for _, candidate in ipairs(candidates) do
    if not seen[candidate] then
      seen[candidate] = true
      local version = M.python_version(candidate)
      if version then
        if version[1] > M.MIN_PYTHON[1] or (version[1] == M.MIN_PYTHON[1] and version[2] >= M.MIN_PYTHON[2]) then
          return candidate, too_old
        end
        table.insert(too_old, string.format('%s (Python %d.%d)', candidate, version[1], version[2]))
      end
    end
  end
  return nil, too_old
end

local function shell_quote(part)
  if part:match('^[%w%./_%-=:@%[%]]+$') then
    return part
  end
  return "'" .. part:gsub("'", "'\\''") .. "'"
end

function M.manual_command(base, source)
  return string.format('%s -m venv %s && %s -m pip install %s', shell_quote(base), shell_quote(M.env_dir()), shell_quote(M.env_python()), shell_quote(source))
end

--- pip's output says the package index could not be reached.
function M.looks_offline(output)
  for _, pattern in ipairs({ 'NewConnectionError', 'Failed to establish a new connection', 'Temporary failure in name resolution', 'Network is unreachable', 'No matching distribution found', 'Could not find a version that satisfies' }) do
    if output:find(pattern, 1, true) then
      return true
    end
  end
  return false
end

local function fail(message, on_done)
  running = false
  status.set('error', message)
  vim.notify('adaptrack: ' .. message, vim.log.levels.ERROR)
  if on_done then
    on_done(false, message)
  end
end

--- Run `command` as a job; each output line goes to the log and the status; `next(code, output)`.
local function job(command, log, next)
  local output = {}
  local function take(_, data)
    for _, line in ipairs(data or {}) do
      if line ~= '' then
        table.insert(output, line)
        log:write(line .. '\n')
        log:flush()
        local shown = line:match('^(Collecting .*)') or line:match('^(Successfully installed .*)') or line:match('^(Installing collected packages.*)')
        if shown then
          status.set('installing', shown:sub(1, 80))
        end
      end
    end
  end
  local env = { PIP_DISABLE_PIP_VERSION_CHECK = '1', PYTHONNOUSERSITE = '1', PYTHONPATH = '', VIRTUAL_ENV = '' }
  local id = vim.fn.jobstart(command, {
    env = env,
    on_stdout = take,
    on_stderr = take,
    on_exit = function(_, code)
      vim.schedule(function()
        next(code, table.concat(output, '\n'))
      end)
    end,
  })
  if id <= 0 then
    next(-1, 'cannot run ' .. command[1])
  end
end

--- Create the private environment and install the server into it (asynchronous).
--- `on_done(ok, message)` runs at the end.  Returns false when an install already runs.
function M.install(options, on_done)
  if running then
    vim.notify('adaptrack: the server install is already running (log: ' .. M.log_path() .. ')', vim.log.levels.WARN)
    return false
  end
  running = true
  local source = M.source(options)
  local base, too_old = M.base_python(options and options.python or nil)
  if not base then
    local found = #too_old > 0 and ('only ' .. table.concat(too_old, ', ') .. ' found') or 'no Python interpreter found on PATH'
    fail(string.format('the server needs Python %d.%d or newer (%s): install one, then run :AdaptrackInstall (or pipx install adaptrack-lsp)', M.MIN_PYTHON[1], M.MIN_PYTHON[2], found), on_done)
    return true
  end
  local manual = M.manual_command(base, source)
  local storage = vim.fn.fnamemodify(M.env_dir(), ':h')
  local made = pcall(vim.fn.mkdir, storage, 'p')
  if not made or vim.fn.isdirectory(storage) ~= 1 or vim.fn.filewritable(storage) ~= 2 then
    fail(string.format('cannot write %s: install the server yourself (pipx install adaptrack-lsp, or pip install %s) and set the python option to that interpreter', storage, shell_quote(source)), on_done)
    return true
  end
  vim.fn.mkdir(vim.fn.stdpath('cache'), 'p')
  local log = assert(io.open(M.log_path(), 'w'))
  local started = vim.loop.now()
  status.set('installing', 'creating the environment with ' .. base)
  vim.fn.delete(M.env_dir(), 'rf') -- a half-made or broken one
  job({ base, '-m', 'venv', M.env_dir() }, log, function(code, output)
    if code ~= 0 then
      log:close()
      local hint = output:find('ensurepip', 1, true) and ' (on Debian/Ubuntu: apt install python3-venv)' or ''
      fail(string.format('could not create the environment with %s%s; by hand: %s', base, hint, manual), on_done)
      return
    end
    status.set('installing', 'installing ' .. source .. ' with pip')
    job({ M.env_python(), '-m', 'pip', 'install', '--upgrade', '--progress-bar', 'off', '--timeout', '20', '--retries', '1', source }, log, function(pip_code, pip_output)
      log:close()
      if pip_code ~= 0 then
        local why = M.looks_offline(pip_output) and 'the package index could not be reached (offline?)' or ('pip failed; log: ' .. M.log_path())
        fail(string.format('installing the server failed: %s; once fixed run :AdaptrackInstall again, or by hand: %s', why, manual), on_done)
        return
      end
      local stamp = io.open(stamp_path(), 'w')
      if stamp then
        stamp:write(source .. '\n')
        stamp:close()
      end
      running = false
      local message = string.format('the server is installed in %s (%d s)', M.env_dir(), math.floor((vim.loop.now() - started) / 1000))
      status.set('stopped', message)
      vim.notify('adaptrack: ' .. message)
      if on_done then
        on_done(true, message)
      end
    end)
  end)
  return true
end

return M

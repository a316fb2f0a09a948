--- adaptrack for Neovim: version-correct AI completions from the adaptrack-lsp server.
---
--- Owns: `setup{}` (options, autocmds, user commands), starting one server per project
--- root (`vim.lsp.start` on 0.8+, `vim.lsp.start_client` + `buf_attach_client` on 0.7),
--- passing the settings, and wiring ghost text (own extmarks, or the native
--- `vim.lsp.inline_completion` on 0.12+), 'completefunc'/'omnifunc' and the status.
local compat = require('adaptrack.compat')
local config = require('adaptrack.config')
local complete = require('adaptrack.complete')
local ghost = require('adaptrack.ghost')
local keys = require('adaptrack.keys')
local native = require('adaptrack.native')
local status = require('adaptrack.status')

local uv = vim.uv or vim.loop

local M = {}

M.NAME = 'adaptrack'

local options = nil
local group = nil
local clients_by_root = {} -- root dir -> client id (0.7 path)

local function has(feature)
  return vim.fn.has(feature) == 1
end

local function use_native()
  local setting = options.native_inline_completion
  local available = native.available()
  if setting == true and not available then
    error('adaptrack: native_inline_completion = true needs Neovim 0.12+ (vim.lsp.inline_completion)', 0)
  end
  return setting ~= false and available
end

--- The project root of `buf`: the nearest parent with a root marker, else the file's folder.
function M.root_dir(buf)
  local name = vim.api.nvim_buf_get_name(buf)
  local start = name ~= '' and vim.fn.fnamemodify(name, ':p:h') or uv.cwd()
  local dir = start
  while dir and dir ~= '' do
    for _, marker in ipairs(options.root_markers) do
      if uv.fs_stat(dir .. '/' .. marker) then
        return dir
      end
    end
    local parent = vim.fn.fnamemodify(dir, ':h')
    if parent == dir then
      break
    end
    dir = parent
  end
  return start
end

--- The adaptrack client attached to `buf`, or nil.
function M.get_client(buf)
  buf = buf or vim.api.nvim_get_current_buf()
  for _, client in ipairs(compat.clients(M.NAME, buf)) do
    if not compat.is_stopped(client) then
      return client
    end
  end
  return nil
end

local function progress_handler(err, result, ctx, handler_config)
  status.handle_progress(result)
  local default = vim.lsp.handlers['$/progress']
  if default then
    return default(err, result, ctx, handler_config)
  end
end

local function client_config(root)
  local capabilities = vim.lsp.protocol.make_client_capabilities()
  capabilities.textDocument = capabilities.textDocument or {}
  capabilities.textDocument.inlineCompletion = { dynamicRegistration = false }
  capabilities.window = capabilities.window or {}
  capabilities.window.workDoneProgress = true
  local command, source = config.server_command(options)
  return {
    name = M.NAME,
    cmd = command,
    cmd_cwd = config.server_cwd(),
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = root } },
    init_options = options.server_settings,
    settings = { adaptrack = options.server_settings },
    capabilities = capabilities,
    handlers = {
      ['adaptrack/status'] = function(_, params)
        status.handle_notification(nil, params)
      end,
      ['$/progress'] = progress_handler,
    },
    on_attach = function(client, buf)
      M._on_attach(client, buf)
    end,
    on_exit = function(code, signal)
      vim.schedule(function()
        if code ~= 0 and source == 'fallback' and status.state ~= 'error' then
          status.set('error', 'no adaptrack-lsp server found (python3 has none): run :AdaptrackInstall, or pipx install adaptrack-lsp; :checkhealth adaptrack')
        elseif code ~= 0 and status.state ~= 'error' then
          status.set('error', string.format('server exited with code %s (signal %s); see :LspLog', code, signal))
        elseif status.state ~= 'error' then
          status.set('stopped')
        end
      end)
    end,
  }
end

function M._on_attach(client, buf)
  if options.completion.completefunc then
    vim.bo[buf].completefunc = 'v:lua.adaptrack_completefunc'
  end
  if options.completion.omnifunc then
    vim.bo[buf].omnifunc = 'v:lua.vim.lsp.omnifunc'
  end
  if use_native() then
    keys.map(buf, options.ghost_text, native.text, native.accept)
    native.attach(buf)
    native.enable(buf, options.ghost_text.enabled)
  else
    -- the plugin's requests check `ghost_text.enabled` each time, so toggling needs no re-attach
    ghost.attach(buf, options, M.get_client)
  end
end

--- Start (or reuse) the server for `buf`'s project and attach it.
function M.attach(buf)
  buf = buf or vim.api.nvim_get_current_buf()
  if not vim.tbl_contains(options.filetypes, vim.bo[buf].filetype) or vim.bo[buf].buftype ~= '' then
    return nil
  end
  local root = M.root_dir(buf)
  if status.state == 'stopped' then
    status.set('starting')
  end
  if has('nvim-0.8') then
    return vim.lsp.start(client_config(root), { bufnr = buf })
  end
  local id = clients_by_root[root]
  local client = id and vim.lsp.get_client_by_id(id)
  if not client or compat.is_stopped(client) then
    id = vim.lsp.start_client(client_config(root))
    if not id then
      status.set('error', 'could not start ' .. table.concat((config.server_command(options)), ' ') .. ' (:checkhealth adaptrack)')
      return nil
    end
    clients_by_root[root] = id
  end
  vim.lsp.buf_attach_client(buf, id)
  return id
end

--- Ask for a suggestion at the cursor now (also works with auto_trigger = false).
--- Returns false when ghost text is off or no server is attached.
function M.suggest()
  local buf = vim.api.nvim_get_current_buf()
  if not options.ghost_text.enabled then
    return false
  end
  if use_native() then
    return M.get_client(buf) ~= nil and native.request(buf)
  end
  return ghost.request(buf, 1)
end

--- Accept the visible suggestion; false when there is none.
function M.accept()
  if options and use_native() then
    return native.accept()
  end
  return ghost.accept(vim.api.nvim_get_current_buf())
end

--- Remove the visible suggestion and cancel the pending request.
function M.dismiss(buf)
  buf = buf or vim.api.nvim_get_current_buf()
  if use_native() then
    native.dismiss(buf)
  else
    ghost.dismiss(buf)
  end
end

--- The suggestion shown after the cursor in `buf` (default: current buffer), or nil.
function M.ghost_text(buf)
  buf = buf or vim.api.nvim_get_current_buf()
  if use_native() then
    return native.text(buf)
  end
  return ghost.text(buf)
end

--- True while a suggestion request for `buf` waits for its debounce or for the server.
function M.pending(buf)
  buf = buf or vim.api.nvim_get_current_buf()
  if use_native() then
    return native.pending(buf)
  end
  return ghost.pending(buf)
end

--- Server state: 'stopped' | 'starting' | 'loading' | 'indexing' | 'ready' | 'degraded' | 'error',
--- and its message.
function M.status()
  return status.state, status.message
end

--- Text for a statusline component.
function M.statusline()
  return status.statusline()
end

--- Change server settings at run time (sent as workspace/didChangeConfiguration).
function M.update_settings(settings)
  local merged = vim.tbl_extend('force', options.settings, settings or {})
  local server_settings = config.server_settings_from(merged)
  options.settings = merged
  options.server_settings = server_settings
  for _, client in ipairs(compat.clients(M.NAME)) do
    client.config.settings = { adaptrack = server_settings }
    compat.notify(client, 'workspace/didChangeConfiguration', { settings = { adaptrack = server_settings } })
  end
end

local function stop_all()
  for _, client in ipairs(compat.clients(M.NAME)) do
    compat.stop(client)
  end
  clients_by_root = {}
end

--- Stop the servers and start them again for every open Python buffer.
function M.restart()
  stop_all()
  local deadline = uv.now() + 5000
  local function again()
    if #compat.clients(M.NAME) > 0 and uv.now() < deadline then
      vim.defer_fn(again, 100)
      return
    end
    status.set('stopped')
    for _, buf in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_is_loaded(buf) then
        M.attach(buf)
      end
    end
  end
  vim.defer_fn(again, 100)
end

--- Turn ghost text on or off (every buffer; on the native path Neovim's inline
--- completion is disabled in the buffers the server is attached to).
function M.toggle()
  options.ghost_text.enabled = not options.ghost_text.enabled
  local native_path = use_native()
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if native_path then
      if vim.api.nvim_buf_is_loaded(buf) and M.get_client(buf) then
        if not options.ghost_text.enabled then
          native.dismiss(buf)
        end
        native.enable(buf, options.ghost_text.enabled)
      end
    elseif not options.ghost_text.enabled then
      ghost.dismiss(buf)
    end
  end
  vim.notify('adaptrack ghost text ' .. (options.ghost_text.enabled and 'on' or 'off'))
end

--- 'completefunc' entry point (see :help complete-functions).
function M.completefunc(findstart, base)
  return complete.completefunc(findstart, base)
end

--- Set up the server's private environment (`:AdaptrackInstall`), then start the servers
--- from it.  `on_done(ok, message)` runs at the end.
function M.install(on_done)
  stop_all()
  return require('adaptrack.install').install(options, function(ok, message)
    if ok and options then
      M.restart()
    end
    if on_done then
      on_done(ok, message)
    end
  end)
end

--- Configure and start: `require('adaptrack').setup{ settings = { model = 'builtin' } }`.
--- The state the last status change left (for `ask_again_when_indexed`).
local last_state = status.state
local listening = false

--- An answer was empty while the API index computed ('indexing'); the server says
--- 'ready' once it is done: ask again at the cursor, as typing would have.
local function ask_again_when_indexed(state)
  local previous = last_state
  last_state = state
  if previous ~= 'indexing' or state ~= 'ready' then
    return
  end
  vim.schedule(function()
    if not options or not options.ghost_text.enabled or not options.ghost_text.auto_trigger then
      return
    end
    if vim.api.nvim_get_mode().mode:sub(1, 1) ~= 'i' then
      return
    end
    local buf = vim.api.nvim_get_current_buf()
    if not M.get_client(buf) then
      return
    end
    if use_native() then
      native.request(buf)
    else
      ghost.request(buf, 2)
    end
  end)
end

function M.setup(user_options)
  options = config.resolve(user_options)
  if not listening then
    listening = true
    status.on_change(ask_again_when_indexed)
  end
  if options.native_inline_completion == true then
    use_native() -- raises with a clear message when unavailable
  end
  M.options = options
  complete.setup(M.get_client)
  _G.adaptrack_completefunc = complete.completefunc
  group = vim.api.nvim_create_augroup('adaptrack', { clear = true })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = options.filetypes,
    callback = function(event)
      M.attach(event.buf)
    end,
  })
  vim.api.nvim_create_user_command('AdaptrackSuggest', function()
    M.suggest()
  end, { desc = 'adaptrack: ask for a suggestion at the cursor' })
  vim.api.nvim_create_user_command('AdaptrackRestart', M.restart, { desc = 'adaptrack: restart the server' })
  vim.api.nvim_create_user_command('AdaptrackToggle', M.toggle, { desc = 'adaptrack: ghost text on/off' })
  vim.api.nvim_create_user_command('AdaptrackInstall', function()
    M.install()
  end, { desc = "adaptrack: set up the server's private environment (venv + pip)" })
  vim.api.nvim_create_user_command('AdaptrackStatus', function()
    local state, message = M.status()
    vim.notify(string.format('adaptrack: %s%s', state, message ~= '' and (' (' .. message .. ')') or ''))
  end, { desc = 'adaptrack: show the server state' })
  -- buffers opened before setup()
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.tbl_contains(options.filetypes, vim.bo[buf].filetype) then
      M.attach(buf)
    end
  end
  return M
end

return M

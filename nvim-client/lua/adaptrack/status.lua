--- Server state for the statusline and notifications.
---
--- Owns: the state fed by the server's `adaptrack/status` notification and by the
--- model-loading `$/progress` ("adaptrack: loading model"), and its text for a statusline
--- (`require('adaptrack').statusline()`).
local M = {}

M.LOADING_TITLE = 'adaptrack: loading model'

M.state = 'stopped' -- 'stopped' | 'starting' | 'loading' | 'indexing' | 'ready' | 'degraded' | 'error'
M.message = ''
M.percentage = nil

local loading_tokens = {}
local listeners = {}

local function changed()
  for _, listener in ipairs(listeners) do
    pcall(listener, M.state, M.message)
  end
  pcall(vim.api.nvim_exec_autocmds, 'User', { pattern = 'AdaptrackStatus', modeline = false })
end

function M.on_change(listener)
  table.insert(listeners, listener)
end

function M.set(state, message)
  M.state = state
  M.message = message or ''
  if state ~= 'loading' then
    M.percentage = nil
  end
  changed()
end

--- Handler of `adaptrack/status` ({state = 'loading'|'indexing'|'ready'|'degraded'|'error',
--- message = string}).  'indexing': the API members a completion needs are being
--- computed (that answer was empty); 'ready' follows when they are.
function M.handle_notification(_, params)
  local state = type(params) == 'table' and params.state or nil
  if state ~= 'loading' and state ~= 'indexing' and state ~= 'ready' and state ~= 'degraded' and state ~= 'error' then
    M.set('error', 'malformed adaptrack/status notification: ' .. vim.inspect(params))
    return
  end
  M.set(state, type(params.message) == 'string' and params.message or '')
  if state == 'error' then
    vim.schedule(function()
      vim.notify('adaptrack: ' .. M.message, vim.log.levels.ERROR)
    end)
  end
end

--- Look at one `$/progress` value; only the model-loading progress changes the state.
function M.handle_progress(params)
  if type(params) ~= 'table' or type(params.value) ~= 'table' then
    return
  end
  local token, value = tostring(params.token), params.value
  if value.kind == 'begin' then
    if value.title ~= M.LOADING_TITLE then
      return
    end
    loading_tokens[token] = true
    M.state = 'loading'
  elseif not loading_tokens[token] then
    return
  end
  if value.kind == 'end' then
    loading_tokens[token] = nil
    M.percentage = nil
  else
    if type(value.percentage) == 'number' then
      M.percentage = math.max(0, math.min(100, value.percentage))
    end
    if type(value.message) == 'string' then
      M.message = value.message
    end
  end
  changed()
end

--- Short text for a statusline, e.g. "adaptrack: loading 40%".
function M.statusline()
  if M.state == 'loading' and M.percentage then
    return string.format('adaptrack: loading %d%%', M.percentage)
  end
  return 'adaptrack: ' .. M.state
end

return M

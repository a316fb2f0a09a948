--- List completions for 'completefunc' (<C-x><C-u>) from `textDocument/completion`.
---
--- Owns: the asynchronous completefunc (first call sends the request and returns -2,
--- the answer opens the popup with `complete()` if the cursor has not moved).
local compat = require('adaptrack.compat')
local position = require('adaptrack.position')

local M = {}

local pending = nil -- { client, id }
local get_client = nil

function M.setup(client_lookup)
  get_client = client_lookup
end

--- Complete-items (see :help complete-items) for an LSP completion result.
function M.to_complete_items(result, prefix)
  local items = {}
  for _, item in ipairs(compat.result_items(result)) do
    local word = item.textEdit and item.textEdit.newText or item.insertText or item.label
    if type(word) == 'string' and word ~= '' and word:sub(1, #prefix) == prefix then
      table.insert(items, {
        word = word,
        abbr = item.label,
        menu = '[adaptrack]',
        info = item.detail or '',
        icase = 0,
        dup = 1,
        empty = 0,
        user_data = { adaptrack = true },
      })
    end
  end
  return items
end

local function cancel_pending()
  if pending then
    pcall(compat.cancel_request, pending.client, pending.id)
    pending = nil
  end
end

--- 'completefunc': `findstart` 1 sends the request and returns -2 (stay in completion
--- mode); the answer calls complete().  Also callable as a Lua function.
function M.completefunc(findstart, _base)
  if findstart ~= 1 and findstart ~= '1' then
    return {}
  end
  cancel_pending()
  local buf = vim.api.nvim_get_current_buf()
  local client = get_client and get_client(buf)
  if not client then
    return -3 -- leave completion mode silently
  end
  local row, col = position.cursor()
  local line = vim.api.nvim_get_current_line()
  local start = vim.fn.match(line:sub(1, col), [[\k*$]])
  if start < 0 then
    start = col
  end
  local prefix = line:sub(start + 1, col)
  local encoding = client.offset_encoding or 'utf-16'
  local changedtick = vim.api.nvim_buf_get_changedtick(buf)
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = position.to_lsp(buf, row, col, encoding),
    context = { triggerKind = 1 },
  }
  local request = {}
  local ok, id = compat.request(client, 'textDocument/completion', params, function(err, result)
    if pending ~= request then
      return
    end
    pending = nil
    if err or vim.api.nvim_get_current_buf() ~= buf or vim.api.nvim_get_mode().mode:sub(1, 1) ~= 'i' then
      return
    end
    local now_row, now_col = position.cursor()
    if now_row ~= row or now_col ~= col or vim.api.nvim_buf_get_changedtick(buf) ~= changedtick then
      return
    end
    vim.fn.complete(start + 1, M.to_complete_items(result, prefix))
  end, buf)
  if ok then
    request.client, request.id = client, id
    pending = request
  end
  return -2
end

return M

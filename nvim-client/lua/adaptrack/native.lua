--- Ghost text through Neovim's own `vim.lsp.inline_completion` (0.12+).
---
--- Owns: turning it on and off per buffer, and the plugin's public functions on that path
--- (ask now, dismiss, the text shown, pending work).  Neovim's public API only enables,
--- accepts and cycles; asking, dismissing and reading the suggestion go through its
--- per-buffer completion object (`vim.lsp._capability.all.inline_completion.active[buf]`),
--- checked here so that a Neovim that renames it gives a clear error, not a silent no-op.
local M = {}

local METHOD = 'textDocument/inlineCompletion'
local NAMESPACE = 'nvim.lsp.inline_completion'
local INVOKED = 1

--- True when this Neovim has `vim.lsp.inline_completion`.
function M.available()
  return vim.lsp.inline_completion ~= nil and type(vim.lsp.inline_completion.enable) == 'function'
end

--- Turn Neovim's inline completion on or off for `buf` (all clients attached to it that
--- serve `textDocument/inlineCompletion`).  `bufnr` and `client_id` are exclusive filters
--- in Neovim, so the filter is the buffer.
function M.enable(buf, enabled)
  vim.lsp.inline_completion.enable(enabled, { bufnr = buf })
end

function M.is_enabled(buf)
  return vim.lsp.inline_completion.is_enabled({ bufnr = buf })
end

--- Neovim's completion object of `buf`, or nil when inline completion is off there.
local function completor(buf)
  local capability = vim.lsp._capability
  local class = capability and capability.all and capability.all.inline_completion
  if type(class) ~= 'table' or type(class.active) ~= 'table' then
    error('adaptrack: this Neovim has no vim.lsp._capability.all.inline_completion; set native_inline_completion = false', 0)
  end
  return class.active[buf]
end

--- Ask for a suggestion at the cursor now (an invoked request); false when inline
--- completion is off in `buf`.
function M.request(buf)
  local object = completor(buf)
  if not object then
    return false
  end
  object:request(INVOKED)
  return true
end

--- Remove the suggestion and cancel pending requests in `buf`, including one still
--- waiting for its debounce (Neovim's own abort on InsertLeave leaves that timer running,
--- so a suggestion would appear in normal mode).
function M.dismiss(buf)
  local object = completor(buf)
  if object then
    if type(object.reset_timer) == 'function' then
      object:reset_timer()
    end
    object:abort()
  end
end

--- Dismiss on leaving insert mode, after Neovim's own handler.
function M.attach(buf)
  local group = vim.api.nvim_create_augroup('adaptrack.native.' .. buf, { clear = true })
  vim.api.nvim_create_autocmd('InsertLeave', {
    group = group,
    buffer = buf,
    callback = function()
      M.dismiss(buf)
    end,
  })
end

--- Accept the suggestion in the current buffer; false when there is none.
function M.accept()
  return vim.lsp.inline_completion.get() == true
end

--- The suggestion text Neovim draws after the cursor in `buf` (its extmark), or nil.
function M.text(buf)
  local object = completor(buf)
  if not object or not object.current then
    return nil
  end
  local namespace = vim.api.nvim_create_namespace(NAMESPACE)
  local marks = vim.api.nvim_buf_get_extmarks(buf, namespace, 0, -1, { details = true })
  local parts = {}
  for _, mark in ipairs(marks) do
    local details = mark[4]
    local lines = {}
    local first = {}
    for _, chunk in ipairs(details.virt_text or {}) do
      table.insert(first, chunk[1])
    end
    table.insert(lines, table.concat(first))
    for _, line in ipairs(details.virt_lines or {}) do
      local pieces = {}
      for _, chunk in ipairs(line) do
        table.insert(pieces, chunk[1])
      end
      table.insert(lines, table.concat(pieces))
    end
    table.insert(parts, table.concat(lines, '\n'))
  end
  local text = table.concat(parts)
  return text ~= '' and text or nil
end

--- True while an inline completion request for `buf` is waiting for its debounce or
--- for the server.
function M.pending(buf)
  local object = completor(buf)
  if not object then
    return false
  end
  if object.timer and not object.timer:is_closing() then
    return true
  end
  for client_id in pairs(object.client_state or {}) do
    local client = vim.lsp.get_client_by_id(client_id)
    for _, request in pairs(client and client.requests or {}) do
      if request.bufnr == buf and request.method == METHOD and request.type == 'pending' then
        return true
      end
    end
  end
  return false
end

return M

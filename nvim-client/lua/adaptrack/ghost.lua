--- Ghost text from `textDocument/inlineCompletion`, drawn with extmarks.
---
--- Owns: debounced requests while typing, cancelling stale requests, drawing the first
--- suggestion as virtual text at the cursor, accepting it (a text edit of the item's
--- range) and dismissing it on cursor move, insert-leave or buffer leave.
local compat = require('adaptrack.compat')
local keys = require('adaptrack.keys')
local position = require('adaptrack.position')

local uv = vim.uv or vim.loop

local M = {}

M.namespace = vim.api.nvim_create_namespace('adaptrack.ghost')

local INVOKED, AUTOMATIC = 1, 2

-- buf -> { timer = uv timer, request = {...}, suggestion = {...} }
local buffers = {}
local options = nil
local get_client = nil -- function(buf) -> client or nil

local function buffer_state(buf)
  local state = buffers[buf]
  if not state then
    state = {}
    buffers[buf] = state
  end
  return state
end

local function in_insert_mode()
  local mode = vim.api.nvim_get_mode().mode
  return mode:sub(1, 1) == 'i'
end

local function stop_timer(state)
  if state.timer then
    state.timer:stop()
    state.timer:close()
    state.timer = nil
  end
end

local function cancel_request(state)
  local request = state.request
  state.request = nil
  if request then
    local client = vim.lsp.get_client_by_id(request.client_id)
    if client then
      pcall(compat.cancel_request, client, request.id)
    end
  end
end

local function clear_marks(buf)
  if vim.api.nvim_buf_is_valid(buf) then
    vim.api.nvim_buf_clear_namespace(buf, M.namespace, 0, -1)
  end
end

--- Remove the suggestion and cancel pending work for `buf`.
function M.dismiss(buf)
  buf = buf or vim.api.nvim_get_current_buf()
  local state = buffers[buf]
  if not state then
    return
  end
  stop_timer(state)
  cancel_request(state)
  state.suggestion = nil
  clear_marks(buf)
end

--- Remove the suggestion only (pending requests continue).
local function hide(buf)
  local state = buffers[buf]
  if state then
    state.suggestion = nil
  end
  clear_marks(buf)
end

local function snippet_to_text(text)
  -- `${1:default}` -> default, `$1`/`$0` -> nothing, `\$` -> `$`
  text = text:gsub('%${%d+:([^}]*)}', '%1'):gsub('%$%d+', ''):gsub('\\%$', '$')
  return text
end

--- The text an item inserts (plain string or StringValue).
function M.item_text(item)
  local insert = item.insertText
  if type(insert) == 'table' then
    if insert.kind == 'snippet' then
      return snippet_to_text(insert.value or '')
    end
    return insert.value or ''
  end
  return insert or ''
end

--- Build the suggestion for the first usable item: the text to show after the cursor is
--- the item's text minus what is already typed between the range start and the cursor.
local function make_suggestion(buf, items, row, col, encoding)
  for _, item in ipairs(items) do
    local text = M.item_text(item)
    local start_row, start_col, end_row, end_col = row, col, row, col
    if type(item.range) == 'table' then
      start_row, start_col = position.from_lsp(buf, item.range.start, encoding)
      end_row, end_col = position.from_lsp(buf, item.range['end'], encoding)
    end
    if start_row == row and end_row == row and start_col <= col and end_col >= col then
      local line = vim.api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or ''
      local typed = line:sub(start_col + 1, col)
      if text:sub(1, #typed) == typed and #text > #typed then
        return {
          item = item,
          text = text,
          display = text:sub(#typed + 1),
          start_row = start_row,
          start_col = start_col,
          end_row = end_row,
          end_col = end_col,
          row = row,
          col = col,
        }
      end
    end
  end
  return nil
end

local function render(buf, suggestion)
  clear_marks(buf)
  local lines = vim.split(suggestion.display, '\n', { plain = true })
  local hl = options.ghost_text.hl_group
  local line = vim.api.nvim_buf_get_lines(buf, suggestion.row, suggestion.row + 1, false)[1] or ''
  local mark = { virt_text = { { lines[1], hl } }, hl_mode = 'combine' }
  if vim.fn.has('nvim-0.10') == 1 then
    mark.virt_text_pos = 'inline'
  elseif suggestion.col >= #line then
    mark.virt_text_pos = 'overlay'
  else
    mark.virt_text_pos = 'eol'
  end
  if #lines > 1 then
    local virt_lines = {}
    for index = 2, #lines do
      table.insert(virt_lines, { { lines[index], hl } })
    end
    mark.virt_lines = virt_lines
  end
  vim.api.nvim_buf_set_extmark(buf, M.namespace, suggestion.row, suggestion.col, mark)
end

local function handle_response(buf, request, err, result)
  local state = buffers[buf]
  if not state or state.request ~= request then
    return -- stale: a newer request replaced this one
  end
  state.request = nil
  if err then
    if err.code ~= -32800 then -- RequestCancelled
      vim.notify_once('adaptrack: inline completion failed: ' .. (err.message or vim.inspect(err)), vim.log.levels.WARN)
    end
    return
  end
  if not vim.api.nvim_buf_is_valid(buf) or vim.api.nvim_get_current_buf() ~= buf or not in_insert_mode() then
    return
  end
  local row, col = position.cursor()
  if vim.api.nvim_buf_get_changedtick(buf) ~= request.changedtick or row ~= request.row or col ~= request.col then
    return -- the text or the cursor moved on
  end
  local suggestion = make_suggestion(buf, compat.result_items(result), row, col, request.encoding)
  state.suggestion = suggestion
  if suggestion then
    render(buf, suggestion)
  else
    clear_marks(buf)
  end
end

--- Ask the server for a suggestion at the cursor now (`trigger_kind` 1 = invoked, 2 = automatic).
function M.request(buf, trigger_kind)
  buf = buf or vim.api.nvim_get_current_buf()
  local state = buffer_state(buf)
  stop_timer(state)
  cancel_request(state)
  local client = get_client and get_client(buf)
  if not client then
    return false
  end
  local encoding = client.offset_encoding or 'utf-16'
  local row, col = position.cursor()
  local request = {
    client_id = client.id,
    row = row,
    col = col,
    changedtick = vim.api.nvim_buf_get_changedtick(buf),
    encoding = encoding,
  }
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = position.to_lsp(buf, row, col, encoding),
    context = { triggerKind = trigger_kind or INVOKED },
  }
  state.request = request
  local ok, id = compat.request(client, 'textDocument/inlineCompletion', params, function(err, result)
    handle_response(buf, request, err, result)
  end, buf)
  if not ok then
    state.request = nil
    return false
  end
  request.id = id
  return true
end

--- Debounced automatic request (called while typing).
function M.schedule(buf)
  local state = buffer_state(buf)
  stop_timer(state)
  cancel_request(state)
  local timer = uv.new_timer()
  state.timer = timer
  timer:start(
    options.ghost_text.debounce_ms,
    0,
    vim.schedule_wrap(function()
      if state.timer ~= timer then
        return
      end
      stop_timer(state)
      if vim.api.nvim_buf_is_valid(buf) and vim.api.nvim_get_current_buf() == buf and in_insert_mode() then
        M.request(buf, AUTOMATIC)
      end
    end)
  )
end

--- The suggestion text shown after the cursor in `buf`, or nil.
function M.text(buf)
  local state = buffers[buf or vim.api.nvim_get_current_buf()]
  return state and state.suggestion and state.suggestion.display or nil
end

--- True while a request for `buf` is in flight or waiting for its debounce.
function M.pending(buf)
  local state = buffers[buf or vim.api.nvim_get_current_buf()]
  return state ~= nil and (state.request ~= nil or state.timer ~= nil)
end

--- Insert the suggestion (replacing the item's range) and put the cursor after it.
--- Returns false when there is no suggestion.
function M.accept(buf)
  buf = buf or vim.api.nvim_get_current_buf()
  local state = buffers[buf]
  local suggestion = state and state.suggestion
  if not suggestion then
    return false
  end
  local row, col = position.cursor()
  if row ~= suggestion.row or col ~= suggestion.col then
    M.dismiss(buf)
    return false
  end
  M.dismiss(buf)
  local lines = vim.split(suggestion.text, '\n', { plain = true })
  vim.api.nvim_buf_set_text(buf, suggestion.start_row, suggestion.start_col, suggestion.end_row, suggestion.end_col, lines)
  local end_row = suggestion.start_row + #lines - 1
  local end_col = (#lines == 1 and suggestion.start_col or 0) + #lines[#lines]
  vim.api.nvim_win_set_cursor(0, { end_row + 1, end_col })
  return true
end

local function on_cursor_moved(buf)
  local state = buffers[buf]
  if not state then
    return
  end
  local row, col = position.cursor()
  local suggestion = state.suggestion
  if suggestion and (row ~= suggestion.row or col ~= suggestion.col) then
    hide(buf)
  end
  local request = state.request
  if request and (row ~= request.row or col ~= request.col) then
    cancel_request(state)
  end
end

--- Set up ghost text for `buf` (autocmds and key mappings).
function M.attach(buf, resolved_options, client_lookup)
  options = resolved_options
  get_client = client_lookup
  local state = buffer_state(buf)
  if state.attached then
    return
  end
  state.attached = true
  local group = vim.api.nvim_create_augroup('adaptrack.ghost.' .. buf, { clear = true })
  local auto = options.ghost_text.auto_trigger
  vim.api.nvim_create_autocmd('TextChangedI', {
    group = group,
    buffer = buf,
    callback = function()
      hide(buf)
      if auto and options.ghost_text.enabled then
        M.schedule(buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd('CursorMovedI', {
    group = group,
    buffer = buf,
    callback = function()
      on_cursor_moved(buf)
    end,
  })
  vim.api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave' }, {
    group = group,
    buffer = buf,
    callback = function()
      M.dismiss(buf)
    end,
  })
  vim.api.nvim_create_autocmd('BufWipeout', {
    group = group,
    buffer = buf,
    callback = function()
      M.dismiss(buf)
      buffers[buf] = nil
      pcall(vim.api.nvim_del_augroup_by_id, group)
    end,
  })
  keys.map(buf, options.ghost_text, M.text)
end

--- Undo `attach` for `buf`.
function M.detach(buf)
  M.dismiss(buf)
  local state = buffers[buf]
  if state and state.attached then
    pcall(vim.api.nvim_del_augroup_by_name, 'adaptrack.ghost.' .. buf)
    keys.unmap(buf, options.ghost_text)
  end
  buffers[buf] = nil
end

return M

--- Conversions between Neovim byte columns and LSP positions (utf-8/16/32 encodings).
local M = {}

local function line_text(buf, row)
  return vim.api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or ''
end

--- LSP character index of byte column `col` on `text`.
function M.character(text, col, encoding)
  if encoding == 'utf-8' then
    return col
  end
  local utf32, utf16 = vim.str_utfindex(text, math.min(col, #text))
  return encoding == 'utf-32' and utf32 or utf16
end

--- Byte column of LSP character index `character` on `text` (clamped to the line).
function M.byte_col(text, character, encoding)
  if encoding == 'utf-8' then
    return math.min(character, #text)
  end
  local ok, col = pcall(vim.str_byteindex, text, character, encoding ~= 'utf-32')
  if not ok then
    return #text
  end
  return col
end

--- LSP position of a 0-based (row, byte col) in `buf`.
function M.to_lsp(buf, row, col, encoding)
  return { line = row, character = M.character(line_text(buf, row), col, encoding) }
end

--- 0-based (row, byte col) of an LSP position in `buf`.
function M.from_lsp(buf, position, encoding)
  return position.line, M.byte_col(line_text(buf, position.line), position.character, encoding)
end

--- 0-based (row, byte col) of the cursor of the current window.
function M.cursor()
  local cursor = vim.api.nvim_win_get_cursor(0)
  return cursor[1] - 1, cursor[2]
end

return M

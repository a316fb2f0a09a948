--- Insert-mode keys of both ghost-text paths (the plugin's and Neovim's native one).
---
--- Owns: the `accept_key` and `dismiss_key` mappings of a buffer.  Each key acts when a
--- suggestion is shown there and is the key itself otherwise (a Tab stays a Tab).
local M = {}

--- Map the keys of `ghost_options` in `buf`.  `shown(buf)`: is a suggestion drawn?
--- `accept_now()` (optional): accept inside the mapping, true when it did (Neovim's
--- `vim.lsp.inline_completion.get()` is made for that); without it, accepting runs
--- `require('adaptrack').accept()` after the mapping.
function M.map(buf, ghost_options, shown, accept_now)
  local accept_key = ghost_options.accept_key
  if accept_key then
    vim.keymap.set('i', accept_key, function()
      if accept_now then
        return accept_now() and '' or accept_key
      end
      if shown(buf) then
        return '<Cmd>lua require("adaptrack").accept()<CR>'
      end
      return accept_key
    end, { buffer = buf, expr = true, silent = true, desc = 'adaptrack: accept the suggestion' })
  end
  local dismiss_key = ghost_options.dismiss_key
  if dismiss_key then
    vim.keymap.set('i', dismiss_key, function()
      if shown(buf) then
        return '<Cmd>lua require("adaptrack").dismiss()<CR>'
      end
      return dismiss_key
    end, { buffer = buf, expr = true, silent = true, desc = 'adaptrack: dismiss the suggestion' })
  end
end

--- Remove the mappings `map` made in `buf`.
function M.unmap(buf, ghost_options)
  for _, key in ipairs({ ghost_options.accept_key, ghost_options.dismiss_key }) do
    if key then
      pcall(vim.keymap.del, 'i', key, { buffer = buf })
    end
  end
end

return M

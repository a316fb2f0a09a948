--- Calls whose form changed between Neovim 0.7 and 0.12.
local M = {}

local method_calls = vim.fn.has('nvim-0.11') == 1

--- client.request / client:request: returns ok, request_id.
function M.request(client, method, params, handler, buf)
  if method_calls then
    return client:request(method, params, handler, buf)
  end
  return client.request(method, params, handler, buf)
end

function M.cancel_request(client, id)
  if method_calls then
    return client:cancel_request(id)
  end
  return client.cancel_request(id)
end

function M.notify(client, method, params)
  if method_calls then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

function M.stop(client, force)
  if method_calls then
    return client:stop(force)
  end
  return client.stop(force)
end

function M.is_stopped(client)
  if method_calls then
    return client:is_stopped()
  end
  return client.is_stopped()
end

--- Active clients named `name`, attached to `buf` when given.
function M.clients(name, buf)
  if vim.lsp.get_clients then
    return vim.lsp.get_clients({ name = name, bufnr = buf })
  end
  local found = {}
  local source = buf and vim.lsp.buf_get_clients(buf) or vim.lsp.get_active_clients()
  for _, client in pairs(source) do
    if client.name == name then
      table.insert(found, client)
    end
  end
  return found
end

--- true for a list-like table ({} counts as a list)
function M.is_list(value)
  if type(value) ~= 'table' then
    return false
  end
  local count = 0
  for _ in pairs(value) do
    count = count + 1
  end
  return count == #value
end

--- The items of an LSP result that is either a bare list or a `{ items = ... }` object
--- (CompletionList, InlineCompletionList); {} for anything else.
function M.result_items(result)
  if type(result) ~= 'table' then
    return {}
  end
  if M.is_list(result) then
    return result
  end
  return result.items or {}
end

return M

-- Small helpers shared by the agent-ls modules: position encodings, requests, messages.
local M = {}

local has_011 = vim.fn.has('nvim-0.11') == 1
M.has_011 = has_011

--- Byte column of the LSP `character` in `line` (negotiated position encoding).
--- @param line string
--- @param col integer
--- @param enc string 'utf-8'|'utf-16'|'utf-32'
--- @return integer
function M.to_byte(line, col, enc)
  if col <= 0 then
    return 0
  end
  if enc == 'utf-8' then
    return math.min(col, #line)
  end
  local ok, byte
  if has_011 then
    ok, byte = pcall(vim.str_byteindex, line, enc, col, false)
  else
    ok, byte = pcall(vim.str_byteindex, line, col, enc == 'utf-16')
  end
  if not ok or byte == nil then
    return #line
  end
  return math.min(byte, #line)
end

--- LSP `character` of the byte column `byte` in `line`.
--- @param line string
--- @param byte integer
--- @param enc string
--- @return integer
function M.from_byte(line, byte, enc)
  byte = math.min(math.max(byte, 0), #line)
  if enc == 'utf-8' then
    return byte
  end
  if has_011 then
    return vim.str_utfindex(line, enc, byte, false)
  end
  local u32, u16 = vim.str_utfindex(line, byte)
  return enc == 'utf-16' and u16 or u32
end

--- Send a request with the right call style for the running Neovim.
--- @return boolean ok, integer? request_id
function M.request(client, method, params, handler, bufnr)
  if has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

function M.notify(msg, level)
  vim.notify('agent-ls: ' .. msg, level or vim.log.levels.INFO)
end

--- Lines of a text, as nvim_buf_set_lines wants them.
--- @param text string
--- @return string[]
function M.lines(text)
  return vim.split(text or '', '\n', { plain = true })
end

--- The buffer's text as one string, lines joined with "\n".
function M.buf_text(bufnr)
  return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), '\n')
end

--- A file buffer that an LSP client should attach to.
function M.is_file_buffer(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return false
  end
  if vim.bo[bufnr].buftype ~= '' then
    return false
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == '' then
    return false
  end
  -- Other URI schemes (fugitive://, oil://, agent-ls://) are not files on disk.
  return not name:match('^%a[%w+.-]*://')
end

--- Load (without showing) the buffer of a file URI and return its number.
function M.load_uri(uri)
  local bufnr = vim.uri_to_bufnr(uri)
  if not vim.api.nvim_buf_is_loaded(bufnr) then
    vim.fn.bufload(bufnr)
  end
  vim.bo[bufnr].buflisted = true
  return bufnr
end

--- The buffer number of a URI if that buffer is loaded, else nil.
function M.loaded_buf(uri)
  local fname = vim.uri_to_fname(uri)
  local bufnr = vim.fn.bufnr(fname)
  if bufnr > 0 and vim.api.nvim_buf_is_loaded(bufnr) then
    return bufnr
  end
  return nil
end

--- A short path for display: relative to the cwd when below it.
function M.short(path)
  if not path then
    return '?'
  end
  if path:match('^file://') then
    path = vim.uri_to_fname(path)
  end
  return vim.fn.fnamemodify(path, ':~:.')
end

return M

-- After the README's install steps: the plugin loads from the user's own packpath and init.lua,
-- its help is found, and the server starts for a file buffer. Run with
--   nvim --headless -c 'luafile installed.lua' <file>
local out = {}
local function finish()
  local f = assert(io.open(vim.env.AGENT_LS_TEST_OUT, 'w'))
  f:write(vim.json.encode(out))
  f:close()
  for _, c in ipairs(vim.lsp.get_clients()) do
    c:stop()
  end
  vim.wait(3000, function() return #vim.lsp.get_clients() == 0 end, 20)
  vim.cmd('qall!')
end

local ok, err = pcall(function()
  out.plugin = vim.api.nvim_get_runtime_file('lua/agent_ls/init.lua', false)[1]
  out.command = vim.fn.exists(':AgentAsk') == 2
  out.client = vim.wait(20000, function()
    local c = require('agent_ls').client()
    return c ~= nil and c.initialized
  end, 20)
  vim.cmd('help agent-ls')
  out.help = vim.fn.expand('%:t')
end)
out.error = not ok and tostring(err) or nil
finish()

-- A sub-agent's task in Neovim's real TUI (run inside tmux by test_screenshots.py): pause once
-- the run is done so the test can capture the chat with the task's calls indented under it.
local T = dofile(vim.env.AGENT_LS_HARNESS)

local function gate(name)
  vim.cmd('redraw!')
  local dir = vim.env.AGENT_LS_SHOT_DIR
  local f = assert(io.open(dir .. '/' .. name .. '.ready', 'w'))
  f:close()
  T.wait(function()
    return vim.uv.fs_stat(dir .. '/' .. name .. '.go') ~= nil
  end, 60000, 'the capture of ' .. name)
end

vim.api.nvim_create_autocmd('VimEnter', {
  callback = function()
    vim.schedule(function()
      T.run(function()
        vim.o.termguicolors = true
        vim.o.laststatus = 2
        local agent = T.start({ chat = { width = 80 } })
        local chat = require('agent_ls.chat')
        vim.cmd.edit('app.py')
        T.wait_client(agent)
        vim.cmd('AgentAsk where is the greeting made, and who calls it?')
        T.wait(function() return agent.state.last_result ~= nil end, 30000, 'the result')
        T.data.result = agent.state.last_result
        T.data.chat = chat.text()
        vim.wait(200)
        gate('task')
      end)
    end)
  end,
})

-- The ask/review flow in Neovim's real TUI (run inside tmux by test_screenshots.py): pause at
-- the review and at the end so the test can capture the screen.
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
        local agent = T.start({ chat = { width = 66 } })
        local review = require('agent_ls.review')
        vim.cmd.edit('names.py')
        T.wait_client(agent)
        vim.cmd('AgentAsk rename foo to bar')
        T.wait(function() return review.current() ~= nil end, 20000, 'the review')
        vim.wait(300)
        gate('review')
        vim.cmd('AgentAccept 1')
        vim.cmd('AgentReject 2')
        T.wait(function() return agent.state.last_result ~= nil end, 20000, 'the result')
        T.data.result = agent.state.last_result
        vim.wait(200)
        gate('done')
      end)
    end)
  end,
})

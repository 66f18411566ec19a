-- Two sub-agents in parallel: one asks to run a command, the other streams. The question opens
-- with Neovim's own vim.ui.select in place (not stubbed); the chat must keep streaming while it
-- is open, and the question is then answered with a key.
local T = dofile(vim.env.AGENT_LS_HARNESS)
local MARKER = vim.env.AGENT_LS_TEST_MARKER

local function picker_win()
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.b[vim.api.nvim_win_get_buf(win)].agent_ls_picker then
      return win
    end
  end
end

T.run(function()
  local agent = T.start({ settings = { sandbox = 'off' } })
  local chat = require('agent_ls.chat')
  T.data.builtin_select = require('agent_ls.picker').select_is_builtin()
  vim.cmd.edit(T.ws .. '/a.txt')
  T.wait_client(agent)
  local t0 = vim.uv.hrtime()
  vim.cmd('AgentAsk look around and touch a file')
  T.wait(picker_win, 20000, 'the confirmation')
  T.data.ms_to_question = (vim.uv.hrtime() - t0) / 1e6
  local win = picker_win()
  T.data.picker = T.buf_lines(vim.api.nvim_win_get_buf(win))
  T.data.chat_at_open = chat.text()
  -- the sibling streams on while nobody answers
  T.wait(function() return chat.text():find(MARKER, 1, true) end, 20000, 'the stream during the question')
  T.data.ms_to_stream_end = (vim.uv.hrtime() - t0) / 1e6
  T.data.chat_before_answer = chat.text()
  T.data.picker_still_open = vim.api.nvim_win_is_valid(win)
  T.data.picker_focused = vim.api.nvim_get_current_win() == win
  vim.api.nvim_feedkeys('1', 'x', false) -- 1. Allow
  T.data.picker_closed = not vim.api.nvim_win_is_valid(win)
  T.wait(function() return agent.state.last_result ~= nil end, 30000, 'the run to finish')
  T.data.result = agent.state.last_result
  T.data.chat = chat.text()
end)

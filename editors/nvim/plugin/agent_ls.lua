-- agent-ls user commands. The server starts once require('agent_ls').setup() has run
-- (or on the first command, with the default options). See :help agent-ls.
if vim.g.loaded_agent_ls then
  return
end
vim.g.loaded_agent_ls = true

if vim.fn.has('nvim-0.10') == 0 then
  vim.notify('agent-ls needs Neovim 0.10 or newer', vim.log.levels.ERROR)
  return
end

local function agent()
  local m = require('agent_ls')
  if not m.config then
    m.setup({})
  end
  return m
end

local function review()
  return require('agent_ls.review')
end

local cmd = vim.api.nvim_create_user_command

cmd('AgentAsk', function(o)
  agent().ask(o.args, { range = o.range, line1 = o.line1, line2 = o.line2 })
end, { nargs = '*', range = true, desc = 'agent-ls: ask the agent (a range sends the selection)' })

cmd('AgentFix', function(o)
  agent().fix({ line1 = o.line1, line2 = o.line2 })
end, { range = true, desc = "agent-ls: fix the line's diagnostics with the agent" })

cmd('AgentCancel', function()
  agent().cancel()
end, { desc = 'agent-ls: stop the running agent' })

cmd('AgentSessions', function()
  agent().sessions()
end, { desc = 'agent-ls: pick a session to resume' })

cmd('AgentNewSession', function()
  agent().new_session()
end, { desc = 'agent-ls: start a new session' })

cmd('AgentMode', function(o)
  agent().set_mode(o.args)
end, {
  nargs = '?',
  complete = function()
    return require('agent_ls').modes
  end,
  desc = 'agent-ls: set the permission mode',
})

cmd('AgentStatus', function()
  agent().status()
end, { desc = 'agent-ls: model, mode, session, tokens and cost' })

cmd('AgentMcp', function()
  agent().mcp()
end, { desc = 'agent-ls: MCP servers, their state, tools and errors' })

cmd('AgentClearGrants', function()
  agent().clear_grants()
end, { desc = 'agent-ls: forget what was allowed for this session' })

cmd('AgentRemember', function(o)
  agent().remember(o.args)
end, { nargs = '*', desc = "agent-ls: add a line to the project's memory" })

cmd('AgentUndo', function()
  agent().undo()
end, { desc = "agent-ls: revert what the agent's last run changed" })

cmd('AgentChat', function()
  agent()
  require('agent_ls.chat').toggle()
end, { desc = 'agent-ls: show or hide the chat' })

local function hunk_arg(o)
  local a = vim.trim(o.args or '')
  if a == '' then
    return nil
  end
  return a == 'all' and 'all' or a
end

cmd('AgentAccept', function(o)
  review().decide(hunk_arg(o), 'accepted')
end, { nargs = '?', desc = 'agent-ls: accept a proposed hunk (N, all, or the one at the cursor)' })

cmd('AgentReject', function(o)
  review().decide(hunk_arg(o), 'rejected')
end, { nargs = '?', desc = 'agent-ls: reject a proposed hunk (N, all, or the one at the cursor)' })

cmd('AgentReview', function()
  review().show(true)
end, { desc = 'agent-ls: show the edit waiting for review' })

cmd('AgentReviewFinish', function()
  review().finish()
end, { desc = 'agent-ls: apply the accepted hunks, reject the pending ones' })

cmd('AgentCodeAction', function()
  agent().code_action()
end, { desc = 'agent-ls: code actions for the cursor line, with every diagnostic on it' })

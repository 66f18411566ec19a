-- :checkhealth agent_ls under two configurations: a missing script file, a missing API key.
local T = dofile(vim.env.AGENT_LS_HARNESS)

local function report()
  vim.cmd('checkhealth agent_ls')
  local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
  vim.cmd('bwipeout!')
  return text
end

T.run(function()
  local agent = T.start({ model = 'script:' .. T.ws .. '/no-such-script.json' })
  T.data.missing_script = report()
  agent.config.model = 'anthropic:claude-sonnet-5-5'
  vim.env.ANTHROPIC_API_KEY = nil
  T.data.missing_key = report()
  vim.env.ANTHROPIC_API_KEY = 'sk-test'
  T.data.with_key = report()
end)

-- The floating confirmation picker by itself: which key picks what (no server needed).
local T = dofile(vim.env.AGENT_LS_HARNESS)

T.run(function()
  vim.opt.runtimepath:prepend(vim.env.AGENT_LS_PLUGIN_DIR)
  local picker = require('agent_ls.picker')
  local items = { { title = 'Allow' }, { title = 'Allow for this session' }, { title = 'Deny' } }
  local opts = { prompt = 'agent-ls: Run this shell command?\nrm -rf build', format_item = function(a) return a.title end }
  T.data.answers = {}
  for _, keys in ipairs({ '<CR>', '<Esc>', 'q', '2', ':q<CR>' }) do
    local got = 'no callback'
    picker.float(items, opts, function(choice) got = choice and choice.title or 'nil' end)
    vim.api.nvim_feedkeys(vim.keycode(keys), 'x', false)
    vim.wait(200, function() return got ~= 'no callback' end, 10)
    T.data.answers[keys] = got
  end
  T.data.windows_left = #vim.api.nvim_list_wins()
end)

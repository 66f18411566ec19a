-- Inline review of `workspace/applyEdit`: every proposed hunk is shown in the buffer (the old
-- lines highlighted, the new ones as virtual lines below) and in a review split, and the user
-- accepts or rejects hunk by hunk. Only the accepted hunks are applied, and the answer to the
-- server says truthfully whether anything was.
local util = require('agent_ls.util')

local M = {}

local ns = vim.api.nvim_create_namespace('agent_ls_review')

M.config = {
  enabled = true, -- false: apply edits without review (as Neovim does by default)
  focus = true, -- move the cursor into the review split when a review starts
  height = 14,
  keymaps = {
    accept = 'a',
    reject = 'r',
    accept_all = 'A',
    reject_all = 'R',
    finish = 'q',
    jump = '<CR>',
    next = ']h',
    prev = '[h',
  },
}

--- Reviews waiting for the user; the first one is shown.
M.queue = {}

--- Called with (review, result) when a review is answered (for the chat and for tests).
M.on_done = nil

local function set_highlights()
  vim.api.nvim_set_hl(0, 'AgentLsAdd', { link = 'DiffAdd', default = true })
  vim.api.nvim_set_hl(0, 'AgentLsDelete', { link = 'DiffDelete', default = true })
  vim.api.nvim_set_hl(0, 'AgentLsHunk', { link = 'DiffText', default = true })
  vim.api.nvim_set_hl(0, 'AgentLsAccepted', { link = 'DiagnosticOk', default = true })
  vim.api.nvim_set_hl(0, 'AgentLsRejected', { link = 'Comment', default = true })
end
set_highlights()
vim.api.nvim_create_autocmd('ColorScheme', { callback = set_highlights })

--- The review shown now, if any.
function M.current()
  return M.queue[1]
end

-- -- building a review ---------------------------------------------------------------------

local function file_exists(fname)
  return vim.uv.fs_stat(fname) ~= nil
end

local function sort_edits(edits)
  local sorted = vim.list_extend({}, edits)
  table.sort(sorted, function(a, b)
    local x, y = a.range.start, b.range.start
    return x.line < y.line or (x.line == y.line and x.character < y.character)
  end)
  return sorted
end

--- The old and new lines of one edit, trimmed to what changes.
local function hunk_view(lines, edit, enc)
  local s, e = edit.range.start, edit.range['end']
  local first = lines[s.line + 1] or ''
  local last = lines[e.line + 1] or ''
  local sb = util.to_byte(first, s.character, enc)
  local eb = util.to_byte(last, e.character, enc)
  local old = {}
  for i = s.line + 1, math.min(e.line + 1, #lines) do
    old[#old + 1] = lines[i]
  end
  local new = util.lines(first:sub(1, sb) .. (edit.newText or '') .. last:sub(eb + 1))
  if e.line + 1 > #lines then
    -- the edit reaches past the last line (an append at the end of the file)
    if #old == 0 and new[#new] == '' then
      new[#new] = nil
    end
  end
  local row = s.line
  -- trim lines common to both ends so the view shows only what changes
  while #old > 0 and #new > 0 and old[#old] == new[#new] do
    old[#old] = nil
    new[#new] = nil
  end
  while #old > 0 and #new > 0 and old[1] == new[1] do
    table.remove(old, 1)
    table.remove(new, 1)
    row = row + 1
  end
  return { row = row, old = old, new = new }
end

--- Turn a WorkspaceEdit into a review: documents, and one hunk per text edit.
function M.prepare(wedit, enc, label)
  local docs, by_uri = {}, {}
  local annotations = wedit.changeAnnotations or {}
  local function doc_for(uri)
    if not by_uri[uri] then
      by_uri[uri] = { uri = uri, edits = {}, create = false }
      docs[#docs + 1] = by_uri[uri]
    end
    return by_uri[uri]
  end
  local confirm = false
  local deletes = {}
  local function note_annotation(id)
    local a = id and annotations[id]
    if a and a.needsConfirmation then
      confirm = true
    end
    return a
  end
  if wedit.documentChanges then
    for _, change in ipairs(wedit.documentChanges) do
      if change.kind == 'create' then
        local doc = doc_for(change.uri)
        doc.create = true
        doc.create_options = change.options
        note_annotation(change.annotationId)
      elseif change.kind == 'delete' then
        -- agent.undo offers to delete a file the agent's run created
        deletes[#deletes + 1] = vim.uri_to_fname(change.uri)
      elseif change.kind then
        error(('agent-ls review does not support the resource operation %q'):format(change.kind))
      else
        local doc = doc_for(change.textDocument.uri)
        doc.version = change.textDocument.version
        vim.list_extend(doc.edits, change.edits or {})
      end
    end
  elseif wedit.changes then
    for uri, edits in pairs(wedit.changes) do
      vim.list_extend(doc_for(uri).edits, edits)
    end
  end
  local review = { label = label, enc = enc, docs = docs, hunks = {}, confirm = confirm, deletes = deletes }
  for _, doc in ipairs(docs) do
    doc.fname = vim.uri_to_fname(doc.uri)
    local lines = {}
    if not (doc.create and not file_exists(doc.fname)) then
      doc.bufnr = util.load_uri(doc.uri)
      local current = vim.lsp.util.buf_versions[doc.bufnr]
      if doc.version and current and doc.version > 0 and current > doc.version then
        error(('%s changed since the agent read it'):format(util.short(doc.fname)))
      end
      lines = vim.api.nvim_buf_get_lines(doc.bufnr, 0, -1, false)
      -- the text under review: a save (:w) bumps b:changedtick but changes nothing here
      doc.text = table.concat(lines, '\n')
    end
    doc.edits = sort_edits(doc.edits)
    for i, edit in ipairs(doc.edits) do
      local a = note_annotation(edit.annotationId)
      local view = hunk_view(lines, edit, enc)
      local title = a and a.label or ('Hunk %d of %d (line %d)'):format(i, #doc.edits, view.row + 1)
      if doc.create and not doc.bufnr then
        title = 'Create file'
      end
      review.hunks[#review.hunks + 1] = {
        doc = doc,
        edit = edit,
        n = #review.hunks + 1,
        status = 'pending',
        title = title,
        row = view.row,
        old = view.old,
        new = view.new,
      }
    end
  end
  review.confirm = confirm
  return review
end

-- -- applying ------------------------------------------------------------------------------

--- Apply the accepted hunks; return the ApplyWorkspaceEditResult.
--- Delete the files a review offers to delete, each after a yes from the user.
local function apply_deletes(review)
  local deleted = 0
  for _, fname in ipairs(review.deletes or {}) do
    local choice = vim.fn.confirm(('agent-ls: delete %s (the agent created it)?'):format(util.short(fname)),
      '&Delete\n&Keep', 2)
    if choice == 1 and os.remove(fname) then
      local bufnr = vim.fn.bufnr(fname)
      if bufnr > 0 then
        pcall(vim.api.nvim_buf_delete, bufnr, { force = true })
      end
      deleted = deleted + 1
    end
  end
  return deleted
end

function M.apply(review)
  local applied, failures, accepted_total = 0, {}, apply_deletes(review)
  for _, doc in ipairs(review.docs) do
    local accepted = {}
    for _, h in ipairs(review.hunks) do
      if h.doc == doc and h.status == 'accepted' then
        -- plain TextEdits: the review already took care of the annotations
        accepted[#accepted + 1] = { range = h.edit.range, newText = h.edit.newText or '' }
      end
    end
    accepted_total = accepted_total + #accepted
    if #accepted > 0 then
      local ok, err = pcall(function()
        if doc.create and not file_exists(doc.fname) then
          vim.fn.mkdir(vim.fn.fnamemodify(doc.fname, ':h'), 'p')
          local f = assert(io.open(doc.fname, 'w'))
          f:close()
        end
        if not doc.bufnr or not vim.api.nvim_buf_is_valid(doc.bufnr) then
          doc.bufnr = util.load_uri(doc.uri)
        elseif doc.text
          and table.concat(vim.api.nvim_buf_get_lines(doc.bufnr, 0, -1, false), '\n') ~= doc.text then
          error(('%s was edited during the review'):format(util.short(doc.fname)))
        end
        vim.lsp.util.apply_text_edits(accepted, doc.bufnr, review.enc)
      end)
      if ok then
        applied = applied + #accepted
      else
        failures[#failures + 1] = tostring(err)
      end
    end
  end
  review.applied = applied
  if applied > 0 or accepted_total > 0 and #failures == 0 then
    return { applied = true }
  end
  if #failures > 0 then
    return { applied = false, failureReason = table.concat(failures, '; ') }
  end
  if accepted_total == 0 then
    return { applied = false, failureReason = 'The user rejected the edit' }
  end
  return { applied = false, failureReason = 'nothing was applied' }
end

-- -- showing -------------------------------------------------------------------------------

local function status_hl(status)
  if status == 'accepted' then
    return 'AgentLsAccepted'
  elseif status == 'rejected' then
    return 'AgentLsRejected'
  end
  return 'AgentLsHunk'
end

--- Extmarks in the edited buffers: old lines highlighted, new lines as virtual lines.
local function render_inline(review)
  for _, doc in ipairs(review.docs) do
    if doc.bufnr and vim.api.nvim_buf_is_valid(doc.bufnr) then
      vim.api.nvim_buf_clear_namespace(doc.bufnr, ns, 0, -1)
    end
  end
  if review.closed then
    return
  end
  for _, h in ipairs(review.hunks) do
    local buf = h.doc.bufnr
    if buf and vim.api.nvim_buf_is_valid(buf) then
      local count = vim.api.nvim_buf_line_count(buf)
      local row = math.min(h.row, count - 1)
      -- short, so it fits beside the code: the review split has the hunk's full title
      local label = h.status == 'pending'
          and ('  hunk %d/%d · :AgentAccept %d · :AgentReject %d'):format(h.n, #review.hunks, h.n, h.n)
        or ('  hunk %d/%d · %s'):format(h.n, #review.hunks, h.status)
      local virt = {}
      if h.status ~= 'rejected' then
        for _, l in ipairs(h.new) do
          virt[#virt + 1] = { { '+ ' .. l, 'AgentLsAdd' } }
        end
      end
      if #h.old > 0 and h.status ~= 'rejected' then
        local last = math.min(h.row + #h.old - 1, count - 1)
        vim.api.nvim_buf_set_extmark(buf, ns, row, 0, {
          end_row = last,
          end_col = #(vim.api.nvim_buf_get_lines(buf, last, last + 1, false)[1] or ''),
          hl_group = 'AgentLsDelete',
          hl_eol = true,
          virt_text = { { label, status_hl(h.status) } },
        })
        if #virt > 0 then
          vim.api.nvim_buf_set_extmark(buf, ns, last, 0, { virt_lines = virt })
        end
      else
        local above = h.row < count
        vim.api.nvim_buf_set_extmark(buf, ns, above and row or count - 1, 0, {
          virt_text = { { label, status_hl(h.status) } },
          virt_lines = #virt > 0 and virt or nil,
          virt_lines_above = above,
        })
      end
    end
  end
end

local function review_buf(review)
  if review.buf and vim.api.nvim_buf_is_valid(review.buf) then
    return review.buf
  end
  local buf = vim.api.nvim_create_buf(false, true)
  pcall(vim.api.nvim_buf_set_name, buf, 'agent-ls://review/' .. tostring(buf))
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].swapfile = false
  vim.b[buf].agent_ls_review = true
  local km = M.config.keymaps
  local function map(lhs, fn, desc)
    if lhs then
      vim.keymap.set('n', lhs, fn, { buffer = buf, nowait = true, desc = 'agent-ls: ' .. desc })
    end
  end
  map(km.accept, function() M.decide(nil, 'accepted') end, 'accept the hunk')
  map(km.reject, function() M.decide(nil, 'rejected') end, 'reject the hunk')
  map(km.accept_all, function() M.decide('all', 'accepted') end, 'accept every pending hunk')
  map(km.reject_all, function() M.decide('all', 'rejected') end, 'reject every pending hunk')
  map(km.finish, function() M.finish() end, 'finish (pending hunks are rejected)')
  map(km.jump, function() M.jump() end, 'show the hunk in its buffer')
  map(km.next, function() M.move(1) end, 'next hunk')
  map(km.prev, function() M.move(-1) end, 'previous hunk')
  review.buf = buf
  return buf
end

local function render_list(review)
  local buf = review_buf(review)
  local km = M.config.keymaps
  local lines = {
    -- the server's label reads "agent: edit_file calc.py"; the header says "Agent edit" already
    ('Agent edit: %s · %d hunk%s'):format(
      review.label and (review.label:gsub('^agent[%w-]*:%s*', '')) or 'proposed change',
      #review.hunks, #review.hunks == 1 and '' or 's'),
    ('%s accept · %s reject · %s accept all · %s reject all · %s finish · %s jump'):format(
      km.accept, km.reject, km.accept_all, km.reject_all, km.finish, km.jump),
    '',
  }
  local hls = { { 0, 'Title' }, { 1, 'Comment' } }
  for _, h in ipairs(review.hunks) do
    h.list_row = #lines
    hls[#hls + 1] = { #lines, status_hl(h.status) }
    lines[#lines + 1] = ('%s · %s [%s]'):format(h.title, util.short(h.doc.fname), h.status)
    for _, l in ipairs(h.old) do
      hls[#hls + 1] = { #lines, 'AgentLsDelete' }
      lines[#lines + 1] = '- ' .. l
    end
    for _, l in ipairs(h.new) do
      hls[#hls + 1] = { #lines, 'AgentLsAdd' }
      lines[#lines + 1] = '+ ' .. l
    end
    h.list_end = #lines - 1
    lines[#lines + 1] = ''
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  for _, hl in ipairs(hls) do
    vim.api.nvim_buf_set_extmark(buf, ns, hl[1], 0, { line_hl_group = hl[2] })
  end
end

local function review_win(review)
  if not review.buf then
    return nil
  end
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(win) == review.buf then
      return win
    end
  end
end

--- Show the current review (inline marks and the review split).
function M.show(focus)
  local review = M.current()
  if not review then
    util.notify('no edit is waiting for review')
    return
  end
  render_inline(review)
  render_list(review)
  local win = review_win(review)
  if not win then
    local prev = vim.api.nvim_get_current_win()
    -- show the edited file where the user is working, if it is not visible yet
    local doc = review.docs[1]
    if doc and doc.bufnr and vim.fn.bufwinid(doc.bufnr) == -1 and vim.bo.buftype == '' then
      vim.api.nvim_win_set_buf(prev, doc.bufnr)
    end
    vim.cmd(('belowright %dsplit'):format(math.max(4, math.min(M.config.height,
      vim.api.nvim_buf_line_count(review.buf)))))
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, review.buf)
    vim.wo[win].number = false
    vim.wo[win].relativenumber = false
    vim.wo[win].signcolumn = 'no'
    vim.wo[win].wrap = false
    if focus == false then
      vim.api.nvim_set_current_win(prev)
    end
  elseif focus then
    vim.api.nvim_set_current_win(win)
  end
  local first = M.pending()[1]
  if first and first.list_row then
    pcall(vim.api.nvim_win_set_cursor, win, { first.list_row + 1, 0 })
  end
  vim.cmd('redraw')
end

function M.pending()
  local review = M.current()
  local out = {}
  for _, h in ipairs(review and review.hunks or {}) do
    if h.status == 'pending' then
      out[#out + 1] = h
    end
  end
  return out
end

--- The hunk under the cursor (review split or edited buffer), if any.
local function hunk_at_cursor(review)
  local buf = vim.api.nvim_get_current_buf()
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  for _, h in ipairs(review.hunks) do
    if buf == review.buf and h.list_row and row >= h.list_row and row <= (h.list_end or h.list_row) then
      return h
    end
    if buf == h.doc.bufnr and row >= h.row and row <= h.row + math.max(#h.old - 1, 0) then
      return h
    end
  end
end

-- -- deciding ------------------------------------------------------------------------------

local function close_ui(review)
  review.closed = true
  render_inline(review)
  local win = review_win(review)
  if win and #vim.api.nvim_list_wins() > 1 then
    pcall(vim.api.nvim_win_close, win, true)
  end
  if review.buf and vim.api.nvim_buf_is_valid(review.buf) then
    pcall(vim.api.nvim_buf_delete, review.buf, { force = true })
  end
end

--- Answer the server and move on to the next review.
local function answer(review, result)
  if review.answered then
    return
  end
  review.answered = true
  close_ui(review)
  for i, r in ipairs(M.queue) do
    if r == review then
      table.remove(M.queue, i)
      break
    end
  end
  if M.on_done then
    pcall(M.on_done, review, result)
  end
  if review.co then
    vim.schedule(function()
      local ok, err = coroutine.resume(review.co, result)
      if not ok then
        util.notify('review: ' .. tostring(err), vim.log.levels.ERROR)
      end
    end)
  end
  review.result = result
  if M.current() then
    vim.schedule(function()
      M.show(M.config.focus)
    end)
  end
end

--- Apply what was accepted (pending hunks count as rejected) and answer the server.
function M.finish()
  local review = M.current()
  if not review then
    return
  end
  for _, h in ipairs(review.hunks) do
    if h.status == 'pending' then
      h.status = 'rejected'
    end
  end
  answer(review, M.apply(review))
end

--- Accept or reject hunk `which` (a number, 'all', or nil: the one under the cursor, else the
--- first pending one). The review finishes by itself once no hunk is pending.
function M.decide(which, status)
  local review = M.current()
  if not review then
    util.notify('no edit is waiting for review', vim.log.levels.WARN)
    return
  end
  local targets = {}
  if which == 'all' then
    targets = M.pending()
  elseif type(which) == 'number' or (type(which) == 'string' and which:match('^%d+$')) then
    local h = review.hunks[tonumber(which)]
    if not h then
      util.notify(('there is no hunk %s (1-%d)'):format(which, #review.hunks), vim.log.levels.WARN)
      return
    end
    targets = { h }
  else
    local h = hunk_at_cursor(review)
    if not h or h.status ~= 'pending' then
      h = M.pending()[1]
    end
    targets = { h }
  end
  for _, h in ipairs(targets) do
    h.status = status
  end
  if #M.pending() == 0 then
    M.finish()
    return
  end
  render_inline(review)
  render_list(review)
  local win = review_win(review)
  local nxt = M.pending()[1]
  if win and nxt and nxt.list_row and vim.api.nvim_get_current_win() == win then
    pcall(vim.api.nvim_win_set_cursor, win, { nxt.list_row + 1, 0 })
  end
end

--- Move between hunks in the review split.
function M.move(delta)
  local review = M.current()
  if not review then
    return
  end
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  local rows = {}
  for _, h in ipairs(review.hunks) do
    rows[#rows + 1] = h.list_row
  end
  local target
  if delta > 0 then
    for _, r in ipairs(rows) do
      if r > row then
        target = r
        break
      end
    end
  else
    for i = #rows, 1, -1 do
      if rows[i] < row then
        target = rows[i]
        break
      end
    end
  end
  if target then
    vim.api.nvim_win_set_cursor(0, { target + 1, 0 })
  end
end

--- Show the hunk under the cursor in its buffer.
function M.jump()
  local review = M.current()
  local h = review and (hunk_at_cursor(review) or M.pending()[1])
  if not h or not h.doc.bufnr then
    return
  end
  local win = vim.fn.bufwinid(h.doc.bufnr)
  if win == -1 then
    vim.cmd('wincmd p')
    vim.api.nvim_win_set_buf(0, h.doc.bufnr)
    win = vim.api.nvim_get_current_win()
  else
    vim.api.nvim_set_current_win(win)
  end
  pcall(vim.api.nvim_win_set_cursor, win, { h.row + 1, 0 })
end

--- Withdraw every open review (the run ended or was cancelled): nothing is applied.
function M.abort_all(reason)
  while M.current() do
    local review = M.current()
    for _, h in ipairs(review.hunks) do
      h.status = 'rejected'
    end
    answer(review, { applied = false, failureReason = reason or 'the review was withdrawn' })
  end
end

-- -- the handler -------------------------------------------------------------------------------

--- `workspace/applyEdit` handler for the agent-ls client.
function M.handler(_, params, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  local enc = client and client.offset_encoding or 'utf-16'
  local wedit = params and params.edit or {}
  local ok, review = pcall(M.prepare, wedit, enc, params and params.label)
  if not ok then
    return { applied = false, failureReason = tostring(review) }
  end
  if not M.config.enabled or not review.confirm then
    for _, h in ipairs(review.hunks) do
      h.status = 'accepted'
    end
    if #review.hunks == 0 and #review.deletes == 0 then
      return { applied = true }
    end
    return M.apply(review)
  end
  if #review.hunks == 0 then
    return M.apply(review) -- only deletions: each is its own question
  end
  local co, is_main = coroutine.running()
  if not co or is_main then
    -- Not called from a coroutine (Neovim < 0.10): one question for the whole edit.
    local choice = vim.fn.confirm(('Apply %s (%d hunks)?'):format(review.label or 'the edit', #review.hunks),
      '&Apply\n&Reject', 2)
    for _, h in ipairs(review.hunks) do
      h.status = choice == 1 and 'accepted' or 'rejected'
    end
    return M.apply(review)
  end
  review.co = co
  M.queue[#M.queue + 1] = review
  if #M.queue == 1 then
    M.show(M.config.focus)
  end
  return coroutine.yield()
end

return M

;;; ask_edit.el --- plain eglot (no plugin) against agent-ls: ask -> confirm -> edit  -*- lexical-binding: t -*-
;;
;; Run: emacs --batch -l ask_edit.el (--batch skips the init file; Debian's site-start
;; puts its elpa packages on `package-directory-list'),, with AGENT_LS_TEST_FILE, AGENT_LS_TEST_OUT and
;; AGENT_LS_SERVER_CMD (a JSON list).  eglot 1.9 declares documentChanges but no change
;; annotations, so the server asks "Apply / Reject" with window/showMessageRequest before it
;; sends the edit; eglot's own handler asks with `completing-read', which is answered here.

(require 'package)
(package-initialize)
(require 'eglot)
(require 'json)
(require 'cl-lib)

(setq eglot-confirm-server-initiated-edits nil) ; else y-or-n-p reads stdin
(setq eglot-sync-connect 30)
(setq jsonrpc-default-request-timeout 60)
(setq eglot-autoshutdown nil)

(defvar agent-test-asked nil "Prompts of every question eglot asked (newest first).")
(defvar agent-test-answers '("Apply" "Deny") "The answers, in order.")
(defvar agent-test-updates nil "agent/update notifications (newest first).")

;; eglot's own window/showMessageRequest handler calls `completing-read'; answer it here.
(advice-add 'completing-read :override
            (lambda (prompt collection &rest _)
              (push (list prompt collection) agent-test-asked)
              (let ((answer (pop agent-test-answers)))
                (if (member answer collection) answer (car (last collection))))))

;; eglot sends didChange from an idle timer, which never fires while `eglot-execute-command'
;; waits synchronously; the server checks what the buffer holds after an edit, so send the
;; change right after applying it (the snippet editors/README.md recommends).
(cl-defmethod eglot-handle-request :after
  (server (_method (eql workspace/applyEdit)) &rest _)
  (dolist (buf (eglot--managed-buffers server))
    (with-current-buffer buf
      (when eglot--recent-changes (eglot--signal-textDocument/didChange)))))

(cl-defmethod eglot-handle-notification
  (_server (_method (eql agent/update)) &key _sessionId update)
  (push update agent-test-updates))

(defun agent-test-chunks ()
  (mapconcat (lambda (u)
               (if (equal (plist-get u :sessionUpdate) "agent_message_chunk")
                   (plist-get (plist-get u :content) :text)
                 ""))
             (reverse agent-test-updates) ""))

(defun agent-test-outputs ()
  "rawOutput of every finished tool call, in order."
  (vconcat
   (delq nil (mapcar (lambda (u)
                       (when (and (equal (plist-get u :sessionUpdate) "tool_call_update")
                                  (member (plist-get u :status) '("completed" "failed")))
                         (list :status (plist-get u :status) :rawOutput (plist-get u :rawOutput))))
                     (reverse agent-test-updates)))))

(defun agent-test-outcomes ()
  "One line per finished tool call: its title, status and (for edits) what became of it."
  (let ((titles (make-hash-table :test 'equal)) lines)
    (dolist (u (reverse agent-test-updates))
      (let ((id (plist-get u :toolCallId)) (title (plist-get u :title)))
        (when (and id title) (puthash id title titles))
        (when (and (equal (plist-get u :sessionUpdate) "tool_call_update")
                   (member (plist-get u :status) '("completed" "failed")))
          (let* ((raw (plist-get u :rawOutput))
                 (outcome (cond ((stringp raw) raw)
                                ((listp raw) (or (plist-get raw :status) (plist-get raw :error)))))
                 (outcome (and (stringp outcome) (car (split-string outcome "\n")))))
            (push (format "%s %s · %s%s"
                          (if (equal (plist-get u :status) "completed") "✓" "✗")
                          (gethash id titles id) (plist-get u :status)
                          (if outcome (concat " · " (truncate-string-to-width outcome 80)) ""))
                  lines)))))
    (nreverse lines)))

(defun agent-test-pause-for-screenshot (buffer result)
  "With AGENT_LS_SHOT_DIR set (a TTY run in tmux), show the outcome and wait to be captured."
  (let ((dir (getenv "AGENT_LS_SHOT_DIR")))
    (when (and dir (not noninteractive))
      (delete-other-windows)
      (switch-to-buffer buffer)
      (goto-char (point-min))
      (let ((chat (get-buffer-create "*agent-ls stream*")))
        (with-current-buffer chat
          (erase-buffer)
          (insert "agent/update chunks received by eglot:\n\n"
                  (replace-regexp-in-string "\n\n+" "\n" (agent-test-chunks)) "\n\n")
          (dolist (a (reverse agent-test-asked))
            (insert "asked: " (replace-regexp-in-string "\n.*" "" (car a))
                    "  " (format "%S" (cadr a)) "\n"))
          (insert "\n")
          (dolist (line (agent-test-outcomes)) (insert line "\n"))
          (insert (format "\nresult: stopReason %s" (plist-get result :stopReason)))
          (goto-char (point-min)))
        (display-buffer chat '(display-buffer-below-selected (window-height . 20))))
      (message "[eglot] Edit successful!  agent.ask -> %s" (plist-get result :stopReason))
      (redisplay t)
      (with-temp-file (expand-file-name "emacs.ready" dir))
      (let ((deadline (+ (float-time) 60)))
        (while (and (not (file-exists-p (expand-file-name "emacs.go" dir)))
                    (< (float-time) deadline))
          (sleep-for 0.1))))))

(defun agent-test-write (data)
  (with-temp-file (getenv "AGENT_LS_TEST_OUT")
    (insert (json-encode data))))

(let* ((file (getenv "AGENT_LS_TEST_FILE"))
       ;; sandbox off: the shell question is part of the test (sandboxed, `touch' would not ask)
       (contact (append (json-read-from-string (getenv "AGENT_LS_SERVER_CMD"))
                        '(:initializationOptions (:sandbox "off"))))
       (status 1)
       server)
  (condition-case err
      (with-current-buffer (find-file-noselect file)
        (python-mode)
        (setq server (eglot (list 'python-mode) (cons 'transient default-directory)
                            'eglot-lsp-server contact "python"))
        ;; interactively (the screenshot run) the connection can finish a moment later
        (with-timeout (20 nil)
          (while (not (eglot-managed-p)) (accept-process-output nil 0.05)))
        (unless (eglot-managed-p) (error "the buffer is not managed by eglot"))
        (let* ((commands (plist-get (plist-get (eglot--capabilities server) :executeCommandProvider)
                                    :commands))
               (result (eglot-execute-command
                        server 'agent.ask
                        (vector (list :prompt "Use an f-string in greet"
                                      :uri (eglot--path-to-uri file))))))
          (agent-test-write
           `((result . ,result)
             (commands . ,commands)
             (buffer . ,(buffer-substring-no-properties (point-min) (point-max)))
             (modified . ,(if (buffer-modified-p) t :json-false))
             (asked . ,(mapcar (lambda (a) `((prompt . ,(car a)) (choices . ,(vconcat (cadr a)))))
                               (reverse agent-test-asked)))
             (chunks . ,(agent-test-chunks))
             (outputs . ,(agent-test-outputs))
             (emacs . ,emacs-version)
             (eglot . ,(or (ignore-errors (package-desc-version (cadr (assq 'eglot package-alist))))
                           "built-in"))))
          (setq status 0)
          (agent-test-pause-for-screenshot (current-buffer) result)))
    (error (agent-test-write `((error . ,(error-message-string err))
                               (asked . ,(length agent-test-asked))
                               (chunks . ,(agent-test-chunks))))))
  (message "agent-test: done at %.2f s" (float-time (time-since before-init-time)))
  (when server (ignore-errors (eglot-shutdown server nil 5)))
  (message "agent-test: shut down at %.2f s" (float-time (time-since before-init-time)))
  (kill-emacs status))

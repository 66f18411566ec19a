;;; readme_snippet.el --- the README's eglot snippet, verbatim, on a run longer than 10 s  -*- lexical-binding: t -*-
;;
;; Run: emacs --batch -l readme_snippet.el with AGENT_LS_SNIPPET (a file holding the elisp block
;; of editors/README.md), AGENT_LS_TEST_FILE and AGENT_LS_TEST_OUT; `agent-ls' on PATH.
;; Only the user is simulated: answers to the minibuffer questions.

(require 'package)
(package-initialize)
(require 'json)
(require 'cl-lib)

(with-temp-buffer
  (insert-file-contents (getenv "AGENT_LS_SNIPPET"))
  (goto-char (point-min))
  (condition-case nil
      (while t (eval (read (current-buffer)) t))
    (end-of-file nil)))

(defvar agent-test-asked nil "Every question the user was asked (newest first).")

;; The user answers eglot's showMessageRequest (completing-read): Apply the edit.
(advice-add 'completing-read :override
            (lambda (prompt collection &rest _)
              (push (list "completing-read" prompt collection) agent-test-asked)
              (if (member "Apply" collection) "Apply" (car (last collection)))))
;; A second confirmation (eglot's own) would come through these: count them, say yes.
(dolist (fn '(y-or-n-p yes-or-no-p))
  (advice-add fn :override
              (lambda (prompt &rest _) (push (list (symbol-name fn) prompt nil) agent-test-asked) t)))

(defun agent-test-write (data)
  (with-temp-file (getenv "AGENT_LS_TEST_OUT") (insert (json-encode data))))

(let ((file (getenv "AGENT_LS_TEST_FILE"))
      (status 1)
      (started (float-time)))
  (condition-case err
      (with-current-buffer (find-file-noselect file)
        (python-mode)
        (let ((eglot-sync-connect 30))
          (apply #'eglot (eglot--guess-contact)))
        (with-timeout (30 nil)
          (while (not (eglot-managed-p)) (accept-process-output nil 0.05)))
        (unless (eglot-managed-p) (error "the buffer is not managed by eglot"))
        (setq started (float-time))
        (agent-ls-ask "Use an f-string in greet")
        (let ((returned (float-time)))
          (with-timeout (90 nil)
            (while (not agent-ls-last-result) (accept-process-output nil 0.05)))
          (agent-test-write
           `((result . ,agent-ls-last-result)
             (ask_returned_after . ,(- returned started))
             (answered_after . ,(- (float-time) started))
             (buffer . ,(buffer-substring-no-properties (point-min) (point-max)))
             (asked . ,(vconcat (mapcar (lambda (a) `((via . ,(nth 0 a)) (prompt . ,(nth 1 a))
                                                       (choices . ,(vconcat (nth 2 a)))))
                                        (reverse agent-test-asked)))))))
        (setq status 0))
    (error (agent-test-write `((error . ,(error-message-string err))))))
  (ignore-errors (eglot-shutdown (eglot-current-server) nil 5))
  (kill-emacs status))

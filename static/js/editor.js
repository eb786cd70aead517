// The pack editor: a textarea with a line-number gutter, keyboard helpers, and links from
// validation issues to their line and column. The page works without this file (plain
// form posts); with it, htmx validates as you type.
(() => {
  "use strict";

  const INDENT = "  ";

  function lineStarts(text) {
    const starts = [0];
    for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) starts.push(i + 1);
    return starts;
  }

  // The offset of a 1-based (line, column) position, clamped to its line. The validator
  // counts columns in characters, the textarea in UTF-16 units: an emoji is two of those.
  function offsetOf(text, line, column) {
    const starts = lineStarts(text);
    const index = Math.min(Math.max(line, 1), starts.length) - 1;
    const end = index + 1 < starts.length ? starts[index + 1] - 1 : text.length;
    let offset = starts[index];
    for (let n = 1; n < column && offset < end; n++) {
      const code = text.charCodeAt(offset);
      offset += code >= 0xd800 && code <= 0xdbff && offset + 1 < end ? 2 : 1;
    }
    return offset;
  }

  function setup(root) {
    const textarea = root.querySelector("textarea");
    const gutter = root.querySelector(".gutter");
    if (!textarea || !gutter) return;
    let lineCount = 0;
    let escaped = false; // Esc then Tab leaves the editor (no keyboard trap)

    function renderGutter() {
      const count = textarea.value.split("\n").length;
      if (count === lineCount) return;
      lineCount = count;
      const marks = issueLines();
      const parts = [];
      for (let n = 1; n <= count; n++) {
        const cls = marks.get(n);
        parts.push(`<span data-line="${n}"${cls ? ` class="${cls}"` : ""}>${n}</span>`);
      }
      gutter.innerHTML = parts.join("");
      gutter.scrollTop = textarea.scrollTop;
    }

    function issueLines() {
      const marks = new Map();
      document.querySelectorAll("#report .issue[data-line]").forEach((item) => {
        const n = parseInt(item.dataset.line, 10);
        if (!n) return;
        const cls = item.classList.contains("issue-error") ? "mark-error" : "mark-warning";
        if (marks.get(n) !== "mark-error") marks.set(n, cls);
      });
      return marks;
    }

    function markGutter() {
      const marks = issueLines();
      gutter.querySelectorAll("span").forEach((span) => {
        span.className = marks.get(parseInt(span.dataset.line, 10)) || "";
      });
    }

    function moveTo(line, column) {
      const offset = offsetOf(textarea.value, line, column);
      textarea.focus({ preventScroll: true });
      textarea.setSelectionRange(offset, offset);
      const style = getComputedStyle(textarea);
      const lineHeight = parseFloat(style.lineHeight) || 20;
      const top = (line - 1) * lineHeight;
      if (top < textarea.scrollTop || top > textarea.scrollTop + textarea.clientHeight - lineHeight * 2) {
        textarea.scrollTop = Math.max(0, top - textarea.clientHeight / 3);
      }
      gutter.scrollTop = textarea.scrollTop;
      root.scrollIntoView({ block: "nearest" });
    }

    function selectedLines() {
      const value = textarea.value;
      const start = value.lastIndexOf("\n", textarea.selectionStart - 1) + 1;
      let end = value.indexOf("\n", Math.max(textarea.selectionEnd - (textarea.selectionEnd > textarea.selectionStart ? 1 : 0), textarea.selectionStart));
      if (end === -1) end = value.length;
      return { start, end };
    }

    function replaceRange(start, end, text, selStart, selEnd) {
      textarea.setSelectionRange(start, end);
      // execCommand keeps the browser's undo stack; fall back to setRangeText.
      if (!document.execCommand || !document.execCommand("insertText", false, text)) {
        textarea.setRangeText(text, start, end, "end");
      }
      textarea.setSelectionRange(selStart, selEnd);
      textarea.dispatchEvent(new Event("input", { bubbles: true }));
    }

    function indent(outdent) {
      const { selectionStart, selectionEnd, value } = textarea;
      if (!outdent && selectionStart === selectionEnd) {
        replaceRange(selectionStart, selectionEnd, INDENT, selectionStart + INDENT.length, selectionStart + INDENT.length);
        return;
      }
      const { start, end } = selectedLines();
      const lines = value.slice(start, end).split("\n");
      let firstDelta = 0;
      let total = 0;
      const changed = lines.map((line, i) => {
        if (outdent) {
          const remove = line.startsWith(INDENT) ? INDENT.length : line.startsWith(" ") ? 1 : 0;
          if (i === 0) firstDelta = -remove;
          total -= remove;
          return line.slice(remove);
        }
        if (i === 0) firstDelta = INDENT.length;
        total += INDENT.length;
        return INDENT + line;
      });
      const newStart = Math.max(start, selectionStart + firstDelta);
      replaceRange(start, end, changed.join("\n"), newStart, Math.max(newStart, selectionEnd + total));
    }

    function newline() {
      const { selectionStart, selectionEnd, value } = textarea;
      const lineStart = value.lastIndexOf("\n", selectionStart - 1) + 1;
      const current = value.slice(lineStart, selectionStart);
      // The next line lines up with the current one's content: after "- key: a", under
      // "key" (the item's next key), not under the dash.
      const [, spaces, dashes] = current.match(/^( *)((?:- +)*)/);
      let lead = spaces + " ".repeat(dashes.length);
      if (/:\s*$/.test(current) && !/^\s*#/.test(current)) lead += INDENT; // a mapping key opens a block
      const insert = "\n" + lead;
      const caret = selectionStart + insert.length;
      replaceRange(selectionStart, selectionEnd, insert, caret, caret);
    }

    function nextIssue() {
      const buttons = Array.from(document.querySelectorAll("#report .issue-jump"));
      if (!buttons.length) return;
      const caretLine = textarea.value.slice(0, textarea.selectionStart).split("\n").length;
      const next = buttons.find((b) => parseInt(b.dataset.line, 10) > caretLine) || buttons[0];
      moveTo(parseInt(next.dataset.line, 10), parseInt(next.dataset.column, 10) || 1);
    }

    textarea.addEventListener("keydown", (event) => {
      if (textarea.readOnly) return;
      if (event.key === "Escape") { escaped = true; return; }
      if (event.key === "Tab" && !escaped && !event.altKey && !event.ctrlKey && !event.metaKey) {
        event.preventDefault();
        indent(event.shiftKey);
      } else if (event.key === "Enter" && !event.shiftKey && !event.ctrlKey && !event.metaKey && !event.isComposing) {
        event.preventDefault();
        newline();
      } else if ((event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "s") {
        event.preventDefault();
        const form = textarea.form;
        if (form && window.htmx) window.htmx.trigger(form, "acsave");
        else if (form) form.requestSubmit();
      } else if (event.key === "F8") {
        event.preventDefault();
        nextIssue();
      }
      if (event.key !== "Escape") escaped = false;
    });
    textarea.addEventListener("keydown", (event) => {
      if (event.key === "F8" && textarea.readOnly) { event.preventDefault(); nextIssue(); }
    });
    textarea.addEventListener("input", renderGutter);
    textarea.addEventListener("scroll", () => { gutter.scrollTop = textarea.scrollTop; });
    gutter.addEventListener("click", (event) => {
      const span = event.target.closest("span[data-line]");
      if (span) moveTo(parseInt(span.dataset.line, 10), 1);
    });

    document.addEventListener("click", (event) => {
      const button = event.target.closest(".issue-jump");
      if (!button) return;
      event.preventDefault();
      moveTo(parseInt(button.dataset.line, 10), parseInt(button.dataset.column, 10) || 1);
    });

    const status = document.getElementById("save-status");
    const form = textarea.form;

    // What the save status (the live region a screen reader hears while typing) says once
    // the report is in: its badges ("2 errors, 0 warnings"), and where to go from there.
    function validated() {
      const badges = Array.from(document.querySelectorAll("#report .report-title .badge"), (b) => b.textContent.trim());
      if (!badges.length) return "Saved and validated.";
      const jump = document.querySelector("#report .issue-error .issue-jump") ? " F8 moves to the next one." : "";
      return `Saved and validated: ${badges.join(", ")}.${jump}`;
    }

    // A refused save answers 400 with the server's message (the editor's save_error
    // partial, naming the field); no answer at all is the connection.
    function refusal(xhr) {
      if (!xhr || !xhr.status) return { message: "Could not save; check your connection. Your text is still here.", field: "" };
      const doc = new DOMParser().parseFromString(xhr.responseText || "", "text/html");
      const found = doc.querySelector("[data-save-error]");
      if (found) return { message: found.textContent.trim(), field: found.dataset.field || "" };
      return { message: `Could not save: the server answered ${xhr.status}. Your text is still here; try again.`, field: "" };
    }

    function markInvalid(field) {
      form.querySelectorAll("[name]").forEach((input) => {
        if (input.name === field) input.setAttribute("aria-invalid", "true");
        else if (input.name === "name" || input.name === "bundle_text") input.removeAttribute("aria-invalid");
      });
    }

    // A save based on an older revision than the draft's (another tab or person saved
    // since) is refused with 409: the text stays here, with a way to reload or copy it.
    const conflict = document.getElementById("save-conflict");
    // A draft published or deleted since (404): nothing to reload, the text can only be copied.
    function showConflict(shown, gone = false) {
      if (!conflict) return;
      conflict.hidden = !shown;
      const reload = conflict.querySelector("[data-reload]");
      if (reload) reload.hidden = gone;
    }

    async function copyText() {
      try {
        await navigator.clipboard.writeText(textarea.value);
      } catch (error) {
        textarea.focus();
        textarea.select();
        if (!document.execCommand || !document.execCommand("copy")) {
          if (status) status.textContent = "Could not copy: your text is selected in the editor; copy it with Ctrl+C.";
          return;
        }
      }
      if (status) status.textContent = "Your text is copied. Reload, then paste what you want to keep.";
    }
    if (conflict) conflict.querySelector("[data-copy-text]").addEventListener("click", copyText);

    // The side panel's forms (save or delete a case, upload or remove a file) post and load
    // the editor again: text typed since the last autosave would be lost, so it is saved
    // first and the form is sent once that save is answered (not at all when it is refused:
    // the status says why).
    const nameInput = document.getElementById("draft-name");
    const current = () => `${nameInput ? nameInput.value : ""}\u0000${textarea.value}`;
    let saved = current();
    let sending = "";
    let waiting = null;
    const dirty = () => current() !== saved;
    document.addEventListener("submit", (event) => {
      const side = event.target;
      if (!form || !window.htmx || textarea.readOnly || side === form || !side.closest(".editor-side") || !dirty()) return;
      if (event.defaultPrevented || side.dataset.confirm) return; // not sent, or deleting the draft
      event.preventDefault();
      waiting = { form: side, submitter: event.submitter };
      if (status) status.textContent = "Saving your text first…";
      window.htmx.trigger(form, "acsave");
    });

    if (form) {
      form.addEventListener("htmx:beforeRequest", () => {
        sending = current();
        if (status) status.textContent = "Saving…";
      });
      form.addEventListener("htmx:afterRequest", (event) => {
        const code = event.detail.xhr ? event.detail.xhr.status : 0;
        if (code >= 200 && code < 300) saved = sending;
        if (!waiting) return;
        if (code < 200 || code >= 300) { waiting = null; return; }
        if (dirty()) { window.htmx.trigger(form, "acsave"); return; }
        const { form: side, submitter } = waiting;
        waiting = null;
        side.requestSubmit(submitter && submitter.form === side ? submitter : undefined);
      });
      // A refused save (400 with the reason, 409 on a conflict) is an answer this editor
      // shows in its save status, not an htmx error: nothing is swapped and htmx does not
      // log "Response Status Error" in the console. Other failures stay htmx errors.
      // htmx fires beforeSwap on the target (#report, outside the form), so listen above it.
      document.body.addEventListener("htmx:beforeSwap", (event) => {
        if (!event.detail.requestConfig || event.detail.requestConfig.elt !== form) return;
        const code = event.detail.xhr && event.detail.xhr.status;
        if (code === 400 || code === 404 || code === 409) {
          event.detail.shouldSwap = false;
          event.detail.isError = false;
        }
      });
      form.addEventListener("htmx:afterRequest", (event) => {
        if (!status) return;
        const code = event.detail.xhr ? event.detail.xhr.status : 0;
        if (code >= 200 && code < 300) {
          status.textContent = document.querySelector("#report[data-report-pending]") ? "Saved; validating…" : validated();
          status.classList.replace("error", "muted");
          markInvalid("");
          showConflict(false);
          return;
        }
        const { message, field } = refusal(event.detail.xhr);
        status.textContent = message;
        status.classList.replace("muted", "error");
        markInvalid(field);
        // A conflict, a session that ended (401), a draft that is gone (404): either way the
        // text is only here now.
        showConflict([401, 404, 409].includes(code), code === 404);
      });
    }
    document.body.addEventListener("htmx:afterSettle", markGutter);

    // An autosave is answered at once; when its report is not stored yet, the answer is a
    // pending report naming its revision and where to load it (draft_report). It is loaded
    // from the report slot, whose hx-sync keeps one such request in flight per tab and only
    // the newest queued. Its target is the pending report it was asked for: once a later save
    // has replaced that, the answer is not swapped in anywhere (htmx leaves a detached target
    // alone), and the server answers 204 to a revision the draft has left: a report is never
    // shown as the current one after the text changed.
    const slot = document.getElementById("report-slot");
    const revision = () => (document.getElementById("draft-revision") || {}).value;
    let requested = "";
    const REPORT_RETRY_MS = 1000;
    function loadPendingReport() {
      const pending = document.querySelector("#report[data-report-url]");
      if (!pending || !slot || !window.htmx || pending.dataset.reportUrl === requested) return;
      requested = pending.dataset.reportUrl;
      window.htmx.ajax("GET", pending.dataset.reportUrl, { source: slot, target: "#report", swap: "outerHTML" });
    }
    if (slot) {
      slot.addEventListener("htmx:afterRequest", (event) => {
        const code = event.detail.xhr ? event.detail.xhr.status : 0;
        const asked = /[?&]revision=(\d+)/.exec((event.detail.pathInfo && event.detail.pathInfo.requestPath) || "");
        if (asked && asked[1] !== revision()) return; // a save of this tab since: its own request follows
        if (code === 200 && document.querySelector("#report[data-report-retry]")) {
          // Another request is still validating this text (the server waited for it a while):
          // ask again in a moment; its report is stored when it is done.
          requested = "";
          window.setTimeout(loadPendingReport, REPORT_RETRY_MS);
          return;
        }
        if (!status || document.querySelector("#report[data-report-pending]")) {
          // 204: the draft is past this revision, though this tab saved nothing since: it was
          // saved elsewhere; the next autosave here is refused and says so.
          if (status && code === 204) status.textContent = "Saved; the draft has changed since (in another tab or by another user).";
          else if (status && code && code !== 200) status.textContent = `Saved; the report could not be loaded (the server answered ${code}). Save again to retry.`;
          return;
        }
        if (code === 200) status.textContent = validated();
      });
      if (form) form.addEventListener("htmx:afterRequest", loadPendingReport);
      loadPendingReport();
    }

    lineCount = 0;
    renderGutter();
    root.agentclash = { moveTo, offsetOf: (line, column) => offsetOf(textarea.value, line, column) };
  }

  // A form that cannot be undone (deleting the draft) asks first. Registered before the
  // editor's own submit listener, which leaves such a form alone.
  document.addEventListener("submit", (event) => {
    const question = event.target.dataset && event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  });

  // The case form's "Add a … row" buttons (the form may arrive by htmx): a row from the
  // formset's empty form, counted in its TOTAL_FORMS, and the focus in its first cell.
  function showRowButtons() {
    document.querySelectorAll("[data-add-row][hidden]").forEach((button) => { button.hidden = false; });
  }
  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-add-row]");
    const fieldset = button && button.closest("fieldset");
    const total = fieldset && fieldset.querySelector('input[name$="-TOTAL_FORMS"]');
    const template = fieldset && fieldset.querySelector("template[data-row-template]");
    if (!total || !template) return;
    const index = parseInt(total.value, 10) || 0;
    button.insertAdjacentHTML("beforebegin", template.innerHTML.replace(/__prefix__/g, String(index)));
    total.value = String(index + 1);
    const row = button.previousElementSibling;
    const first = row && row.querySelector("input");
    if (first) first.focus();
  });
  document.addEventListener("htmx:afterSettle", showRowButtons);

  function init() {
    document.querySelectorAll("[data-editor]").forEach(setup);
    showRowButtons();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
